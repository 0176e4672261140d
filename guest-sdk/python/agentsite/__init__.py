"""Write agentsite agents in Python.

An agent is a WebAssembly component that exports a card and MCP-style tools
(``wit/agent.wit``). With this package an author writes typed functions
with docstrings; ``python -m agentsite.build app.py -o app.wasm`` turns the
program into a component with componentize-py::

    from agentsite import Agent

    agent = Agent("greeter", description="Greets people.", tags=["demo"])

    @agent.tool(read_only=True)
    def greet(name: str, excited: bool = False) -> str:
        '''Says hello.

        Args:
            name: who to greet
            excited: end with an exclamation mark
        '''
        return f"Hello, {name}{'!' if excited else '.'}"

Every call runs in a fresh instance of the program, as for agents in any
language: keep state in ``kv``.
"""

from .agent import Agent
from .results import Audio, EmbeddedResource, Image, Text, ToolError, ToolResult

__all__ = [
    "Agent", "Audio", "EmbeddedResource", "Image", "Text", "ToolError", "ToolResult",
    "NodeError", "log", "progress", "kv", "peers", "llm",
]

_NODE = {"NodeError", "log", "progress", "kv", "peers", "llm"}


def __getattr__(name: str):
    # The node's imports exist only inside a component; loading them on
    # first use keeps the rest of the package importable by plain Python
    # (the build, the SDK's own tests).
    if name in _NODE:
        from . import node

        return getattr(node, name)
    raise AttributeError(f"module 'agentsite' has no attribute {name!r}")
