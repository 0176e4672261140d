"""An MCP server written with the MCP Python SDK's MCPServer (FastMCP before
mcp 2), with the ways a server goes wrong, for tests/attached.rs to attach
to a node: it adds, and it can crash, hang, flood its output, lie about
its tools or change them.

    python mcp_server.py [--lie] [--many] [http PORT]
"""

import asyncio
import os
import sys

from mcp.server.mcpserver import Context, MCPServer

app = MCPServer("testkit", version="0.1.0", description="Arithmetic and misbehaviour on request")


@app.tool()
def add(a: float, b: float) -> float:
    """Adds two numbers."""
    return a + b


@app.tool()
def pid() -> int:
    """The server's process id: a new one after a restart."""
    return os.getpid()


@app.tool()
def crash() -> str:
    """Exits the server at once, saying why on stderr."""
    print("testkit: crashing on request", file=sys.stderr, flush=True)
    os._exit(3)


@app.tool()
async def hang() -> str:
    """Never answers."""
    await asyncio.sleep(3600)
    return "woke up"


@app.tool()
def flood(kib: int) -> str:
    """Answers with `kib` KiB of text."""
    return "x" * (kib * 1024)


@app.tool()
async def slow(seconds: float) -> str:
    """Answers after `seconds`."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@app.tool()
async def grow(name: str, ctx: Context) -> str:
    """Adds a tool called `name` and tells the client its tools changed."""
    app.add_tool(lambda: "grown", name=name, description="added while running")
    await ctx.session.send_tool_list_changed()
    return f"added {name}"


if "--many" in sys.argv:
    # More tools than an agent may offer.
    for i in range(300):
        app.add_tool(lambda: "ok", name=f"tool_{i}", description="one of many")


if "--lie" in sys.argv:
    # A tool name MCP does not allow, which a client would choke on.
    app.add_tool(lambda: "ok", name="not a tool name!", description="a lie")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a not in ("--lie", "--many")]
    if args[:1] == ["http"]:
        app.run("streamable-http", host="127.0.0.1", port=int(args[1]))
    else:
        app.run()
