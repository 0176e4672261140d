"""An agent: its card and the functions that are its tools."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Optional

from . import results
from .schema import ArgumentError, Parameter, check_arguments, describe_function

NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
# MCP Apps' MIME type of an HTML view.
APP_MIME_TYPE = "text/html;profile=mcp-app"

# The one agent of this component: a component exports one card.
_agent: Optional["Agent"] = None


def current() -> "Agent":
    """The agent this component exports."""
    if _agent is None:
        raise RuntimeError("the program defines no agentsite.Agent")
    return _agent


@dataclass
class Tool:
    """A tool as listed: what the function's hints and docstring say."""

    name: str
    title: Optional[str]
    description: str
    input_schema: dict
    output_schema: Optional[dict]
    read_only: Optional[bool]
    destructive: Optional[bool]
    idempotent: Optional[bool]
    open_world: Optional[bool]
    function: Callable
    parameters: list[Parameter]
    # The ui:// resource of the tool's view (MCP Apps), and whether only
    # the view may call the tool.
    app: Optional[str] = None
    app_only: bool = False


@dataclass
class Resource:
    """A resource with fixed contents, as ``Agent.resource`` declares it."""

    uri: str
    name: str
    text: str
    mime_type: Optional[str]
    description: Optional[str]


class CallFailed(Exception):
    """A call that produced no result: kind is ``unknown-tool``,
    ``invalid-arguments`` or ``failed``."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message


class Agent:
    """An agent of a node: a card and tools.

    >>> agent = Agent("stats", description="Statistics of numbers.", tags=["math"])
    >>> @agent.tool(read_only=True)
    ... def mean(values: list[float]) -> float:
    ...     '''The arithmetic mean of some numbers.'''
    ...     return sum(values) / len(values)
    """

    def __init__(
        self,
        name: str,
        *,
        description: str,
        version: str = "0.1.0",
        tags: Optional[list[str]] = None,
        homepage: Optional[str] = None,
    ):
        global _agent
        if not NAME.match(name):
            raise ValueError(
                f"agent name {name!r}: 1 to 64 characters of a-z 0-9 - _, "
                "starting with a letter or digit"
            )
        if _agent is not None:
            raise RuntimeError(f"this component already has the agent {_agent.name!r}")
        self.name = name
        self.version = version
        self.description = description
        self.tags = list(tags or [])
        self.homepage = homepage
        self.tools: dict[str, Tool] = {}
        self.resources: dict[str, Resource] = {}
        _agent = self

    def resource(
        self,
        uri: str,
        text: str,
        *,
        name: str,
        mime_type: Optional[str] = None,
        description: Optional[str] = None,
    ) -> None:
        """Offers ``text`` as the resource at ``uri`` (MCP resources)."""
        if uri in self.resources:
            raise ValueError(f"{self.name} already has a resource at {uri!r}")
        self.resources[uri] = Resource(uri, name, text, mime_type, description)

    def view(self, uri: str, html: str, *, name: str, description: Optional[str] = None) -> None:
        """Offers ``html`` as an interactive view (MCP Apps) at ``uri``, a
        ``ui://`` URI that tools name with ``@agent.tool(app=uri)``."""
        if not uri.startswith("ui://"):
            raise ValueError(f"a view is at a ui:// URI, not {uri!r}")
        self.resource(uri, html, name=name, mime_type=APP_MIME_TYPE, description=description)

    def tool(
        self,
        function: Optional[Callable] = None,
        *,
        name: Optional[str] = None,
        title: Optional[str] = None,
        read_only: Optional[bool] = None,
        destructive: Optional[bool] = None,
        idempotent: Optional[bool] = None,
        open_world: Optional[bool] = None,
        app: Optional[str] = None,
        app_only: bool = False,
    ):
        """Makes a function a tool. ``app`` names the ``ui://`` view (see
        ``view``) that MCP clients render with its results; ``app_only``
        offers the tool to that view alone. Its parameters' type hints give the
        input schema, its docstring the description (the text before
        ``Args:``) and each argument's (the ``Args:`` entries), its return
        hint the output schema. Use as ``@agent.tool`` or with hints:
        ``@agent.tool(read_only=True, idempotent=True)``."""

        def register(function: Callable) -> Callable:
            tool_name = name or function.__name__
            if not TOOL_NAME.match(tool_name):
                raise ValueError(
                    f"tool name {tool_name!r}: 1 to 128 characters of A-Z a-z 0-9 _ - ."
                )
            if tool_name in self.tools:
                raise ValueError(f"{self.name} already has a tool named {tool_name!r}")
            if app is not None and not app.startswith("ui://"):
                raise ValueError(f"tool {tool_name!r}: a view is at a ui:// URI, not {app!r}")
            if app_only and app is None:
                raise ValueError(f"tool {tool_name!r}: app_only needs app=\"ui://...\"")
            description, input_schema, parameters, returns = describe_function(function)
            if not description:
                raise ValueError(f"tool {tool_name!r} needs a docstring: what it does")
            self.tools[tool_name] = Tool(
                name=tool_name,
                title=title,
                description=description,
                input_schema=input_schema,
                output_schema=results.output_schema(returns),
                read_only=read_only,
                destructive=destructive,
                idempotent=idempotent,
                open_world=open_world,
                function=function,
                parameters=parameters,
                app=app,
                app_only=app_only,
            )
            return function

        return register(function) if function is not None else register

    def call(self, name: str, arguments: str) -> results.ToolResult:
        """Runs the tool `name` with `arguments` (a JSON object as text)."""
        tool = self.tools.get(name)
        if tool is None:
            raise CallFailed("unknown-tool", name)
        try:
            decoded: Any = json.loads(arguments) if arguments.strip() else {}
        except ValueError as e:
            raise CallFailed("invalid-arguments", f"the arguments are not JSON: {e}") from None
        try:
            values = check_arguments(tool.parameters, decoded)
        except ArgumentError as e:
            raise CallFailed("invalid-arguments", str(e)) from None
        try:
            return results.to_result(tool.function(**values))
        except results.ToolError as e:
            raise CallFailed("failed", _one_line(str(e)) or "the tool failed") from None
        except CallFailed:
            raise
        except Exception as e:  # the agent's own bug, reported rather than trapped
            reason = _one_line(str(e))
            raise CallFailed("failed", f"{type(e).__name__}: {reason}" if reason else type(e).__name__) from None


def _one_line(text: str) -> str:
    return " ".join(text.split())
