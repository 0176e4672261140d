"""What a tool returns, turned into an MCP tool result.

The conventions are the Rust SDK's:

* ``str`` becomes a text result; ``None`` an empty one.
* ``Text``, ``Image``, ``Audio``, ``EmbeddedResource`` (one or a list) and
  ``ToolResult`` are passed through.
* Anything else JSON can hold (dicts, lists, numbers, booleans, dataclasses,
  TypedDicts, enums) becomes structured content with an output schema, and
  its JSON as text for clients that only read text. Values that are not
  objects are wrapped as ``{"result": value}``: MCP structured content is an
  object.
* ``raise ToolError("reason")`` fails the call with that reason; any other
  exception fails it with the exception's type and message.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import typing
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from .schema import DRAFT, _is_optional, _is_typed_dict, schema_of


class ToolError(Exception):
    """Raise it to fail a call with a one-line reason the caller sees."""


@dataclass
class Text:
    """Plain or markdown text."""

    text: str


@dataclass
class Image:
    """An image: raw bytes and their MIME type, such as ``image/png``."""

    data: bytes
    mime_type: str


@dataclass
class Audio:
    """A sound: raw bytes and their MIME type, such as ``audio/wav``."""

    data: bytes
    mime_type: str


@dataclass
class EmbeddedResource:
    """A resource embedded in a result: text or bytes at a URI."""

    uri: str
    text: Optional[str] = None
    blob: Optional[bytes] = None
    mime_type: Optional[str] = None

    def __post_init__(self):
        if (self.text is None) == (self.blob is None):
            raise ValueError("an embedded resource has either text or blob")


Content = Union[Text, Image, Audio, EmbeddedResource]
CONTENT_TYPES = (Text, Image, Audio, EmbeddedResource)


@dataclass
class ToolResult:
    """A complete result: content blocks, structured content (a dict) and
    whether it reports a failure the caller (often a model) should see."""

    content: list = field(default_factory=list)
    structured: Optional[dict] = None
    is_error: bool = False

    @staticmethod
    def error(reason: str) -> "ToolResult":
        """A result that reports a failure in its text (MCP ``isError``)."""
        return ToolResult([Text(reason)], None, True)


def _plain(value: Any) -> Any:
    """Turns dataclasses and enums into what JSON holds."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return _plain(value.value)
    if isinstance(value, dict):
        return {_key(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise ToolError(
        f"the tool returned a {type(value).__name__}, which is not text, content or JSON"
    )


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    raise ToolError(f"the tool returned an object with a {type(key).__name__} key")


def _wraps(hint: Any) -> bool:
    """Whether values of `hint` are wrapped as {"result": value}."""
    if isinstance(hint, type) and (dataclasses.is_dataclass(hint) or _is_typed_dict(hint)):
        return False
    origin = typing.get_origin(hint)
    if hint is dict or origin in (dict, typing.Dict, typing.Mapping):
        return False
    return True


def output_schema(hint: Any) -> Optional[dict]:
    """The output schema of a function returning `hint`, when its result is
    structured content."""
    if hint is str or hint is None or hint is type(None) or hint is Any:
        return None
    if hint is ToolResult or (isinstance(hint, type) and issubclass(hint, CONTENT_TYPES)):
        return None
    optional, _ = _is_optional(hint)
    origin = typing.get_origin(hint)
    if origin is list and typing.get_args(hint) and _is_content(typing.get_args(hint)[0]):
        return None
    if origin is Union or optional:
        return None
    try:
        schema = schema_of(hint)
    except TypeError:
        return None
    if _wraps(hint):
        schema = {
            "type": "object",
            "properties": {"result": schema},
            "required": ["result"],
        }
    return {"$schema": DRAFT, **schema}


def _is_content(hint: Any) -> bool:
    if isinstance(hint, type) and issubclass(hint, CONTENT_TYPES):
        return True
    return typing.get_origin(hint) is Union and all(
        isinstance(a, type) and issubclass(a, CONTENT_TYPES) for a in typing.get_args(hint)
    )


def to_result(value: Any) -> ToolResult:
    """The MCP result of a tool that returned `value`."""
    if isinstance(value, ToolResult):
        return value
    if value is None:
        return ToolResult()
    if isinstance(value, str):
        return ToolResult([Text(value)])
    if isinstance(value, CONTENT_TYPES):
        return ToolResult([value])
    if isinstance(value, list) and value and all(isinstance(v, CONTENT_TYPES) for v in value):
        return ToolResult(list(value))
    plain = _plain(value)
    structured = plain if isinstance(plain, dict) else {"result": plain}
    text = json.dumps(structured, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return ToolResult([Text(text)], structured)
