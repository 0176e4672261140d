"""What the node gives an agent: its log, progress reports, a key-value
store, other agents and language models.

Each works only as far as the operator granted it (``agentsite grant``);
a call the grant does not cover raises ``NodeError`` with the node's reason,
which a tool can let propagate (the call then fails with that reason) or
handle.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional

from componentize_py_types import Err
from wit_world.imports import host as _host
from wit_world.imports import kv as _kv
from wit_world.imports import llm as _llm
from wit_world.imports import peers as _peers

from .results import ToolError


class NodeError(ToolError):
    """The node refused or could not do what was asked. ``kind`` names the
    case (``not-granted``, ``quota-exceeded``, ``not-found``,
    ``unavailable``, ...); the message is the node's one-line reason."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def _kind(error: Any) -> str:
    """`PeerError_NotGranted` -> `not-granted`."""
    name = type(error).__name__.split("_", 1)[-1]
    return "".join("-" + c.lower() if c.isupper() else c for c in name).lstrip("-")


def _raise(error: Err) -> None:
    value = error.value
    message = value.value if isinstance(value.value, str) else _tool_error_text(value.value)
    raise NodeError(_kind(value), message) from None


def _tool_error_text(error: Any) -> str:
    kind = _kind(error)
    if kind == "unknown-tool":
        return f"unknown tool {error.value}"
    if kind == "invalid-arguments":
        return f"invalid arguments: {error.value}"
    return error.value


# -- log and progress ------------------------------------------------------


class log:
    """The node's log, tagged with the agent's name (``-v`` shows it)."""

    @staticmethod
    def debug(message: str) -> None:
        _host.log(_host.LogLevel.DEBUG, message)

    @staticmethod
    def info(message: str) -> None:
        _host.log(_host.LogLevel.INFO, message)

    @staticmethod
    def warn(message: str) -> None:
        _host.log(_host.LogLevel.WARN, message)

    @staticmethod
    def error(message: str) -> None:
        _host.log(_host.LogLevel.ERROR, message)


def progress(done: float, total: Optional[float] = None, message: Optional[str] = None) -> None:
    """Reports progress of the current call to its caller (MCP progress)."""
    _host.progress(float(done), None if total is None else float(total), message)


# -- key-value store -------------------------------------------------------


class kv:
    """The agent's own key-value store (granted with ``--kv``)."""

    @staticmethod
    def get(key: str) -> Optional[bytes]:
        try:
            return _kv.get(key)
        except Err as e:
            _raise(e)

    @staticmethod
    def get_str(key: str) -> Optional[str]:
        value = kv.get(key)
        return None if value is None else value.decode("utf-8")

    @staticmethod
    def get_json(key: str) -> Any:
        value = kv.get(key)
        return None if value is None else json.loads(value)

    @staticmethod
    def set(key: str, value: bytes | str) -> None:
        """Stores `value` (bytes, or text as UTF-8); durable when it returns."""
        data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
        try:
            _kv.set(key, data)
        except Err as e:
            _raise(e)

    @staticmethod
    def set_json(key: str, value: Any) -> None:
        kv.set(key, json.dumps(value, separators=(",", ":")))

    @staticmethod
    def delete(key: str) -> bool:
        """Removes `key`; returns whether it existed."""
        try:
            return _kv.delete(key)
        except Err as e:
            _raise(e)

    @staticmethod
    def keys(prefix: str = "", after: Optional[str] = None, limit: int = 1000) -> list[str]:
        """Keys starting with `prefix`, ascending, strictly after `after`."""
        try:
            return _kv.list_keys(prefix, after, limit)
        except Err as e:
            _raise(e)


# -- other agents ----------------------------------------------------------


@dataclass
class AgentRef:
    """An agent found on the network."""

    id: str
    name: str
    description: str
    tags: list[str]
    tools: list[str]
    providers: int


@dataclass
class CallResult:
    """Another agent's answer: its text, its structured content (a dict, if
    any) and whether it reports a failure."""

    text: str
    structured: Optional[dict]
    is_error: bool


class peers:
    """Other agents, on this node or the network (granted with ``--peers``)."""

    @staticmethod
    def discover(query: str, limit: int = 10) -> list[AgentRef]:
        try:
            found = _peers.discover(query, limit)
        except Err as e:
            _raise(e)
        return [
            AgentRef(a.id, a.card.name, a.card.description, list(a.card.tags),
                     [t.name for t in a.tools], a.providers)
            for a in found
        ]

    @staticmethod
    def call(agent_id: str, tool: str, arguments: Optional[dict] = None) -> CallResult:
        try:
            result = _peers.call(agent_id, tool, json.dumps(arguments or {}))
        except Err as e:
            _raise(e)
        text = "\n".join(c.value for c in result.content if type(c).__name__ == "Content_Text")
        structured = None if result.structured_content is None else json.loads(result.structured_content)
        return CallResult(text, structured, result.is_error)


# -- language models -------------------------------------------------------


class llm:
    """A language model chosen by the node or the calling client (granted
    with ``--llm``)."""

    @staticmethod
    def chat(
        messages: list[tuple[str, str]],
        *,
        max_tokens: Optional[int] = None,
        temperature: Optional[float] = None,
        model_hint: Optional[str] = None,
    ) -> str:
        """The model's reply to `messages`, pairs of role (``system``,
        ``user``, ``assistant``) and text."""
        roles = {"system": _llm.Role.SYSTEM, "user": _llm.Role.USER,
                 "assistant": _llm.Role.ASSISTANT}
        request = _llm.ChatRequest(
            messages=[_llm.Message(roles[role], content) for role, content in messages],
            model_hint=model_hint,
            max_tokens=max_tokens,
            temperature=temperature,
        )
        try:
            return _llm.chat(request).content
        except Err as e:
            _raise(e)

    @staticmethod
    def ask(prompt: str, max_tokens: int = 256) -> str:
        """The model's answer to one question."""
        return llm.chat([("user", prompt)], max_tokens=max_tokens)
