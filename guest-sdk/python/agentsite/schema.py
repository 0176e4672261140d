"""JSON Schemas from Python type hints, and arguments checked against them.

A tool's parameters become the properties of its input schema; each hint
maps to the schema a client sees and to the check its argument gets before
the function runs, so a schema never promises what the check lets through.

Supported hints: ``str``, ``int``, ``float``, ``bool``, ``None``,
``Optional[X]`` / ``X | None``, ``list[X]``, ``tuple[X, ...]``,
``dict[str, X]``, ``Literal[...]``, ``enum.Enum`` subclasses, dataclasses
and ``TypedDict`` classes (objects with named fields), and ``typing.Any``.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import math
import types
import typing
from typing import Any, Callable, Literal, Union

DRAFT = "https://json-schema.org/draft/2020-12/schema"


class ArgumentError(Exception):
    """An argument that does not match its parameter: where and why."""

    def __init__(self, path: str, reason: str):
        super().__init__(f"{path}: {reason}" if path else reason)
        self.path = path
        self.reason = reason


class HintError(TypeError):
    """A type hint the SDK cannot turn into a schema (raised at build time)."""


def _is_optional(hint: Any) -> tuple[bool, Any]:
    """Whether `hint` admits None, and the hint without it."""
    origin = typing.get_origin(hint)
    if origin is Union or origin is types.UnionType:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) < len(typing.get_args(hint)):
            inner = args[0] if len(args) == 1 else Union[tuple(args)]
            return True, inner
    return False, hint


def _is_typed_dict(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, dict) and hasattr(hint, "__total__")


def _fields(hint: type) -> list[tuple[str, Any, bool, str | None]]:
    """(name, hint, required, description) of a dataclass or TypedDict."""
    hints = typing.get_type_hints(hint)
    notes = docstring_arguments(inspect.getdoc(hint) or "")
    if dataclasses.is_dataclass(hint):
        fields = []
        for field in dataclasses.fields(hint):
            required = (
                field.default is dataclasses.MISSING
                and field.default_factory is dataclasses.MISSING
            )
            fields.append((field.name, hints[field.name], required, notes.get(field.name)))
        return fields
    required_keys = getattr(hint, "__required_keys__", frozenset(hints))
    return [(name, h, name in required_keys, notes.get(name)) for name, h in hints.items()]


def schema_of(hint: Any) -> dict:
    """The JSON Schema of values of type `hint`."""
    if hint is Any or hint is inspect.Parameter.empty:
        return {}
    if hint is type(None) or hint is None:
        return {"type": "null"}
    optional, inner = _is_optional(hint)
    if optional:
        return {"anyOf": [schema_of(inner), {"type": "null"}]}
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is Union or origin is types.UnionType:
        return {"anyOf": [schema_of(a) for a in args]}
    if origin is Literal:
        return {"enum": list(args)}
    if hint is bool:
        return {"type": "boolean"}
    if hint is int:
        return {"type": "integer"}
    if hint is float:
        return {"type": "number"}
    if hint is str:
        return {"type": "string"}
    if origin in (list, typing.List, typing.Sequence) or hint is list:
        return {"type": "array", "items": schema_of(args[0]) if args else {}}
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": schema_of(args[0])}
        return {
            "type": "array",
            "prefixItems": [schema_of(a) for a in args],
            "minItems": len(args),
            "maxItems": len(args),
        }
    if origin in (dict, typing.Dict, typing.Mapping) or hint is dict:
        if args and args[0] is not str:
            raise HintError(f"{hint}: JSON object keys are strings")
        return {"type": "object", "additionalProperties": schema_of(args[1]) if args else {}}
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return {"enum": [member.value for member in hint]}
    if isinstance(hint, type) and (dataclasses.is_dataclass(hint) or _is_typed_dict(hint)):
        schema: dict = {"type": "object", "title": hint.__name__}
        description = _summary(inspect.getdoc(hint) or "")
        if description and not description.startswith(hint.__name__ + "("):
            schema["description"] = description
        properties, required = {}, []
        for name, field_hint, is_required, note in _fields(hint):
            properties[name] = schema_of(field_hint)
            if note:
                properties[name]["description"] = note
            if is_required:
                required.append(name)
        schema["properties"] = properties
        if required:
            schema["required"] = required
        schema["additionalProperties"] = False
        return schema
    raise HintError(f"no JSON Schema for the type hint {hint!r}")


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def convert(value: Any, hint: Any, path: str) -> Any:
    """`value` (decoded JSON) as the Python value `hint` describes, or an
    ArgumentError naming `path` and what was expected."""
    if hint is Any or hint is inspect.Parameter.empty:
        return value
    if hint is type(None) or hint is None:
        if value is not None:
            raise ArgumentError(path, f"expected null, got {_type_name(value)}")
        return None
    optional, inner = _is_optional(hint)
    if optional:
        return None if value is None else convert(value, inner, path)
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is Union or origin is types.UnionType:
        reasons = []
        for option in args:
            try:
                return convert(value, option, path)
            except ArgumentError as e:
                reasons.append(e.reason)
        raise ArgumentError(path, " or ".join(reasons))
    if origin is Literal:
        if value in args and type(value) in {type(a) for a in args}:
            return value
        raise ArgumentError(path, f"expected one of {', '.join(map(repr, args))}, got {value!r}")
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise ArgumentError(path, f"expected a boolean, got {_type_name(value)}")
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ArgumentError(path, f"expected an integer, got {_type_name(value)}")
        if isinstance(value, float) and not value.is_integer():
            raise ArgumentError(path, f"expected an integer, got {value}")
        return int(value)
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ArgumentError(path, f"expected a number, got {_type_name(value)}")
        if not math.isfinite(value):
            raise ArgumentError(path, "expected a finite number")
        return float(value)
    if hint is str:
        if isinstance(value, str):
            return value
        raise ArgumentError(path, f"expected a string, got {_type_name(value)}")
    if origin in (list, typing.List, typing.Sequence) or hint is list or origin is tuple:
        if not isinstance(value, list):
            raise ArgumentError(path, f"expected an array, got {_type_name(value)}")
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            if len(value) != len(args):
                raise ArgumentError(path, f"expected {len(args)} items, got {len(value)}")
            return tuple(convert(v, a, f"{path}[{i}]") for i, (v, a) in enumerate(zip(value, args)))
        item = args[0] if args else Any
        items = [convert(v, item, f"{path}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin in (dict, typing.Dict, typing.Mapping) or hint is dict:
        if not isinstance(value, dict):
            raise ArgumentError(path, f"expected an object, got {_type_name(value)}")
        item = args[1] if args else Any
        return {k: convert(v, item, f"{path}.{k}") for k, v in value.items()}
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        for member in hint:
            if member.value == value and type(member.value) is type(value):
                return member
        choices = ", ".join(repr(m.value) for m in hint)
        raise ArgumentError(path, f"expected one of {choices}, got {value!r}")
    if isinstance(hint, type) and (dataclasses.is_dataclass(hint) or _is_typed_dict(hint)):
        if not isinstance(value, dict):
            raise ArgumentError(path, f"expected an object, got {_type_name(value)}")
        fields = _fields(hint)
        known = {name for name, *_ in fields}
        for key in value:
            if key not in known:
                raise ArgumentError(path, f"unknown field `{key}`, expected {_one_of(known)}")
        converted = {}
        for name, field_hint, required, _ in fields:
            if name in value:
                converted[name] = convert(value[name], field_hint, f"{path}.{name}" if path else name)
            elif required:
                raise ArgumentError(path, f"missing field `{name}`")
        return hint(**converted)
    raise ArgumentError(path, f"cannot check a value against {hint!r}")


def _one_of(names) -> str:
    names = sorted(names)
    if not names:
        return "no fields"
    quoted = [f"`{n}`" for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]


SECTIONS = ("args:", "arguments:", "parameters:", "params:", "returns:", "return:",
            "raises:", "yields:", "examples:", "example:", "attributes:", "fields:", "note:")


def _summary(doc: str) -> str:
    """A docstring's text before its first section (Args:, Returns:, ...)."""
    lines = []
    for line in doc.splitlines():
        if line.strip().lower() in SECTIONS:
            break
        lines.append(line)
    return "\n".join(lines).strip()


def docstring_arguments(doc: str) -> dict[str, str]:
    """Descriptions of parameters from a Google-style ``Args:`` section (or
    ``Attributes:``/``Fields:`` of a class): ``name: text`` or
    ``name (type): text``, continued on more-indented lines."""
    notes: dict[str, str] = {}
    section, current, indent = False, None, None
    for line in doc.splitlines():
        stripped = line.strip()
        if stripped.lower() in ("args:", "arguments:", "parameters:", "params:",
                                "attributes:", "fields:"):
            section, current, indent = True, None, None
            continue
        if not section:
            continue
        if stripped.lower() in SECTIONS:
            section = False
            continue
        if not stripped:
            current = None
            continue
        depth = len(line) - len(line.lstrip())
        if indent is None:
            indent = depth
        if depth == indent and ":" in stripped:
            name, _, text = stripped.partition(":")
            name = name.split("(")[0].strip().lstrip("*")
            current = name
            notes[name] = text.strip()
        elif current is not None and depth > indent:
            notes[current] = f"{notes[current]} {stripped}".strip()
    return notes


@dataclasses.dataclass
class Parameter:
    name: str
    hint: Any
    required: bool
    default: Any


def describe_function(function: Callable) -> tuple[str, dict, list[Parameter], Any]:
    """A function's description, input schema, parameters and return hint."""
    signature = inspect.signature(function)
    hints = typing.get_type_hints(function)
    doc = inspect.getdoc(function) or ""
    notes = docstring_arguments(doc)
    properties, required, parameters = {}, [], []
    for name, parameter in signature.parameters.items():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise HintError(f"{function.__name__}: *{name} cannot be a tool argument")
        hint = hints.get(name, Any)
        schema = schema_of(hint)
        if name in notes and notes[name]:
            schema["description"] = notes[name]
        is_required = parameter.default is inspect.Parameter.empty
        if is_required:
            required.append(name)
        else:
            try:
                schema["default"] = _json_default(parameter.default)
            except TypeError:
                pass
        properties[name] = schema
        parameters.append(Parameter(name, hint, is_required, parameter.default))
    input_schema = {
        "$schema": DRAFT,
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        input_schema["required"] = required
    return _summary(doc), input_schema, parameters, hints.get("return", inspect.Parameter.empty)


def _json_default(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_json_default(v) for v in value]
    raise TypeError("not JSON")


def check_arguments(parameters: list[Parameter], arguments: Any) -> dict:
    """The keyword arguments for a call, from the decoded JSON `arguments`."""
    if not isinstance(arguments, dict):
        raise ArgumentError("", f"the arguments must be a JSON object, got {_type_name(arguments)}")
    known = {p.name for p in parameters}
    for key in arguments:
        if key not in known:
            raise ArgumentError("", f"unknown argument `{key}`, expected {_one_of(known)}")
    values = {}
    for parameter in parameters:
        if parameter.name in arguments:
            values[parameter.name] = convert(arguments[parameter.name], parameter.hint, parameter.name)
        elif parameter.required:
            raise ArgumentError("", f"missing argument `{parameter.name}`")
    return values
