"""The SDK's pure-Python half: schemas from hints, arguments checked
against them, results shaped as the Rust SDK shapes them. (The component
half is tested by tests/languages.rs, with agents built from examples/.)"""

import enum
import sys
import unittest
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Optional, TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agentsite import agent as agent_module  # noqa: E402
from agentsite import Agent, Text, ToolError, ToolResult  # noqa: E402
from agentsite.agent import CallFailed  # noqa: E402
from agentsite.results import output_schema, to_result  # noqa: E402
from agentsite.schema import ArgumentError, convert, describe_function, schema_of  # noqa: E402


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclass
class Point:
    """A point.

    Attributes:
        x: across
        y: up
    """

    x: float
    y: float = 0.0


class Options(TypedDict, total=False):
    verbose: bool


class Schemas(unittest.TestCase):
    def test_hints_become_schemas(self):
        self.assertEqual(schema_of(Optional[int]), {"anyOf": [{"type": "integer"}, {"type": "null"}]})
        self.assertEqual(schema_of(list[str]), {"type": "array", "items": {"type": "string"}})
        self.assertEqual(schema_of(dict[str, float]),
                         {"type": "object", "additionalProperties": {"type": "number"}})
        self.assertEqual(schema_of(Literal["a", "b"]), {"enum": ["a", "b"]})
        self.assertEqual(schema_of(Colour), {"enum": ["red", "blue"]})
        point = schema_of(Point)
        self.assertEqual(point["required"], ["x"])
        self.assertEqual(point["properties"]["x"], {"type": "number", "description": "across"})
        self.assertFalse(point["additionalProperties"])
        self.assertEqual(schema_of(Options)["properties"], {"verbose": {"type": "boolean"}})
        self.assertNotIn("required", schema_of(Options))

    def test_docstrings_describe_the_tool_and_each_argument(self):
        def move(point: Point, steps: int = 1, colour: Colour = Colour.RED) -> Point:
            """Moves a point.

            Several lines of description.

            Args:
                point: where it starts
                steps (int): how far, a description
                    that goes on
            Returns:
                where it ends
            """

        description, schema, parameters, returns = describe_function(move)
        self.assertEqual(description, "Moves a point.\n\nSeveral lines of description.")
        self.assertEqual(schema["required"], ["point"])
        self.assertEqual(schema["properties"]["steps"],
                         {"type": "integer", "description": "how far, a description that goes on",
                          "default": 1})
        self.assertEqual(schema["properties"]["colour"]["default"], "red")
        self.assertIs(returns, Point)


class Arguments(unittest.TestCase):
    def test_values_are_converted_to_their_hints(self):
        self.assertEqual(convert({"x": 1, "y": 2}, Point, "p"), Point(1.0, 2.0))
        self.assertEqual(convert(3.0, int, "n"), 3)
        self.assertIs(convert("blue", Colour, "c"), Colour.BLUE)
        self.assertIsNone(convert(None, Optional[int], "n"))
        self.assertEqual(convert([1, 2], tuple[int, int], "t"), (1, 2))

    def test_mismatches_name_the_argument(self):
        cases = [
            (True, int, "n: expected an integer, got a boolean"),
            (1.5, int, "n: expected an integer, got 1.5"),
            ("x", float, "n: expected a number, got a string"),
            ([1, "a"], list[int], "n[1]: expected an integer, got a string"),
            ({"x": 1, "z": 2}, Point, "n: unknown field `z`, expected `x` or `y`"),
            ({"y": 1}, Point, "n: missing field `x`"),
            ("green", Colour, "n: expected one of 'red', 'blue', got 'green'"),
            (float("nan"), float, "n: expected a finite number"),
        ]
        for value, hint, message in cases:
            with self.assertRaises(ArgumentError, msg=message) as caught:
                convert(value, hint, "n")
            self.assertEqual(str(caught.exception), message)


class Calls(unittest.TestCase):
    def setUp(self):
        agent_module._agent = None
        self.agent = Agent("demo", description="A demo.")

        @self.agent.tool(read_only=True)
        def add(a: float, b: float) -> float:
            """Adds."""
            return a + b

        @self.agent.tool
        def fail() -> str:
            """Fails."""
            raise ToolError("no\nway")

        @self.agent.tool
        def crash() -> str:
            """Crashes."""
            return 1 / 0

    def test_results_follow_the_rust_sdks_conventions(self):
        result = self.agent.call("add", '{"a": 1, "b": 2.5}')
        self.assertEqual(result.structured, {"result": 3.5})
        self.assertEqual(result.content, [Text('{"result":3.5}')])
        self.assertEqual(self.agent.tools["add"].output_schema["properties"]["result"],
                         {"type": "number"})
        self.assertEqual(to_result("hi"), ToolResult([Text("hi")]))
        self.assertEqual(to_result(None), ToolResult())
        self.assertEqual(to_result(Point(1, 2)).structured, {"x": 1, "y": 2})
        self.assertIsNone(output_schema(str))
        self.assertEqual(output_schema(Point)["title"], "Point")

    def test_failures_are_named(self):
        for name, arguments, kind, message in [
            ("nope", "{}", "unknown-tool", "nope"),
            ("add", "{", "invalid-arguments", "the arguments are not JSON"),
            ("add", "[]", "invalid-arguments", "the arguments must be a JSON object, got an array"),
            ("add", '{"a": 1}', "invalid-arguments", "missing argument `b`"),
            ("fail", "{}", "failed", "no way"),
            ("crash", "{}", "failed", "ZeroDivisionError: division by zero"),
        ]:
            with self.assertRaises(CallFailed) as caught:
                self.agent.call(name, arguments)
            self.assertEqual(caught.exception.kind, kind)
            self.assertIn(message, caught.exception.message)

    def test_bad_names_and_a_second_agent_are_refused_at_build_time(self):
        with self.assertRaises(RuntimeError):
            Agent("other", description="A second agent.")
        agent_module._agent = None
        with self.assertRaises(ValueError):
            Agent("Bad Name", description="x")


if __name__ == "__main__":
    unittest.main()


class Views(unittest.TestCase):
    def setUp(self):
        agent_module._agent = None

    def test_a_tool_names_a_view_among_the_agents_resources(self):
        agent = Agent("split", description="Splits bills.")
        agent.view("ui://split/panel", "<!DOCTYPE html><p>hi</p>", name="panel")

        @agent.tool(app="ui://split/panel")
        def split(bill: float) -> float:
            """Splits a bill."""
            return bill / 2

        @agent.tool(app="ui://split/panel", app_only=True)
        def presets() -> list[int]:
            """Numbers of people."""
            return [2, 3]

        self.assertEqual(agent.tools["split"].app, "ui://split/panel")
        self.assertTrue(agent.tools["presets"].app_only)
        panel = agent.resources["ui://split/panel"]
        self.assertEqual(panel.mime_type, "text/html;profile=mcp-app")

    def test_views_are_ui_uris_and_app_only_needs_a_view(self):
        agent = Agent("split", description="Splits bills.")
        with self.assertRaisesRegex(ValueError, "ui:// URI"):
            agent.view("https://example.org/panel", "<p>", name="panel")
        with self.assertRaisesRegex(ValueError, "ui:// URI"):
            agent.tool(name="x", app="https://example.org")(lambda: None)
        with self.assertRaisesRegex(ValueError, "app_only needs app"):
            agent.tool(name="y", app_only=True)(lambda: None)
        agent.resource("notes://a", "text", name="a")
        with self.assertRaisesRegex(ValueError, "already has a resource"):
            agent.resource("notes://a", "text", name="a")
