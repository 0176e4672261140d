"""Unit conversion as an MCP server, written with the MCP Python SDK's
MCPServer (FastMCP before mcp 2). Nothing here knows about agentsite:
attach it to a node and its tools become an agent of the node.

    agentsite attach units -- python examples/python-mcp-units/server.py
    python examples/python-mcp-units/server.py http 8765   # streamable HTTP at /mcp
"""

import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

app = MCPServer(
    "units",
    version="1.0.0",
    description="Converts lengths, masses and temperatures between units",
)

# Metres and kilograms per unit.
LENGTH = {"mm": 0.001, "cm": 0.01, "m": 1.0, "km": 1000.0, "in": 0.0254,
          "ft": 0.3048, "yd": 0.9144, "mi": 1609.344, "nmi": 1852.0}
MASS = {"mg": 1e-6, "g": 0.001, "kg": 1.0, "t": 1000.0,
        "oz": 0.028349523125, "lb": 0.45359237, "st": 6.35029318}
TEMPERATURE = ("C", "F", "K")


def to_kelvin(value: float, unit: str) -> float:
    return {"C": value + 273.15, "F": (value - 32) * 5 / 9 + 273.15, "K": value}[unit]


def from_kelvin(kelvin: float, unit: str) -> float:
    return {"C": kelvin - 273.15, "F": (kelvin - 273.15) * 9 / 5 + 32, "K": kelvin}[unit]


@app.tool()
def convert(value: float, from_unit: str, to_unit: str) -> float:
    """Converts a value between two units of the same kind: length (mm, cm,
    m, km, in, ft, yd, mi, nmi), mass (mg, g, kg, t, oz, lb, st) or
    temperature (C, F, K)."""
    for table in (LENGTH, MASS):
        if from_unit in table and to_unit in table:
            return round(value * table[from_unit] / table[to_unit], 9)
    if from_unit in TEMPERATURE and to_unit in TEMPERATURE:
        kelvin = to_kelvin(value, from_unit)
        if kelvin < 0:
            raise ToolError(f"{value} {from_unit} is below absolute zero")
        return round(from_kelvin(kelvin, to_unit), 9)
    raise ToolError(f"cannot convert {from_unit!r} to {to_unit!r}: "
                     "they are not known units of one kind (see the units tool)")


@app.tool()
def units() -> dict[str, list[str]]:
    """The units convert knows, by kind."""
    return {"length": list(LENGTH), "mass": list(MASS), "temperature": list(TEMPERATURE)}


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        app.run()
