"""The component's exports, as componentize-py expects them: one class per
exported interface of ``wit/agent.wit``, serving the program's ``Agent``."""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports import apps as _apps
from wit_world.exports import prompts as _prompts
from wit_world.exports import resources as _resources
from wit_world.imports import agentsite_agent_types as t

from . import agent as _agent
from . import results


def _dump(schema):
    return None if schema is None else json.dumps(schema, separators=(",", ":"))


def _content(block):
    if isinstance(block, results.Text):
        return t.Content_Text(block.text)
    if isinstance(block, results.Image):
        return t.Content_Image(t.Media(bytes(block.data), block.mime_type))
    if isinstance(block, results.Audio):
        return t.Content_Audio(t.Media(bytes(block.data), block.mime_type))
    body = (t.ResourceBody_Text(block.text) if block.text is not None
            else t.ResourceBody_Blob(bytes(block.blob)))
    return t.Content_Resource(t.EmbeddedResource(block.uri, block.mime_type, body))


class Card(exports.Card):
    def describe(self):
        a = _agent.current()
        return t.AgentCard(a.name, a.version, a.description, a.tags, a.homepage)


class Tools(exports.Tools):
    def list_tools(self):
        return [
            t.Tool(
                tool.name, tool.title, tool.description, _dump(tool.input_schema),
                _dump(tool.output_schema),
                t.ToolAnnotations(tool.read_only, tool.destructive, tool.idempotent,
                                  tool.open_world),
            )
            for tool in _agent.current().tools.values()
        ]

    def call_tool(self, name, arguments):
        try:
            result = _agent.current().call(name, arguments)
        except _agent.CallFailed as failure:
            error = {
                "unknown-tool": t.ToolError_UnknownTool,
                "invalid-arguments": t.ToolError_InvalidArguments,
            }.get(failure.kind, t.ToolError_Failed)
            raise Err(error(failure.message)) from None
        try:
            content = [_content(block) for block in result.content]
            structured = (None if result.structured is None
                          else json.dumps(result.structured, ensure_ascii=False,
                                          separators=(",", ":"), allow_nan=False))
        except (TypeError, ValueError, AttributeError) as e:
            raise Err(t.ToolError_Failed(f"the tool's result cannot be sent: {e}")) from None
        return t.ToolResult(content, structured, result.is_error)


class Resources(exports.Resources):
    def list_resources(self):
        return [
            _resources.Resource(r.uri, r.name, None, r.description, r.mime_type)
            for r in _agent.current().resources.values()
        ]

    def list_resource_templates(self):
        return []

    def read_resource(self, uri):
        found = _agent.current().resources.get(uri)
        if found is None:
            raise Err(_resources.ResourceError_NotFound(uri))
        return [_resources.ResourceContents(uri, found.mime_type, t.ResourceBody_Text(found.text))]


class Apps(exports.Apps):
    def tool_apps(self):
        return [
            _apps.ToolApp(tool.name, tool.app, [_apps.Audience.APP] if tool.app_only else [])
            for tool in _agent.current().tools.values()
            if tool.app is not None
        ]


class Prompts(exports.Prompts):
    def list_prompts(self):
        return []

    def get_prompt(self, name, arguments):
        raise Err(_prompts.PromptError_UnknownPrompt(name))
