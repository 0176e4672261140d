"""The official MCP Python SDK (`mcp` on PyPI) as a client of agentsite.

Run by tests/python_client.rs:

    python mcp_client.py http <url>                  # a running `agentsite serve`
    python mcp_client.py stdio <agentsite> <data-dir> # spawns `agentsite mcp`

Both modes list and call the example agents' tools, including a tool error
and an unknown tool. Over HTTP the client also lends its model (sampling)
to the conformance agent and reads its resources and prompts. Prints one
line per check and exits non-zero at the first failure.
"""

import sys
from contextlib import asynccontextmanager

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError


def check(condition, what):
    if not condition:
        raise AssertionError(what)
    print(f"ok: {what}")


def text_of(result):
    return "\n".join(block.text for block in result.content if block.type == "text")


async def lend_model(context, params):
    """The sampling callback: a stand-in model that echoes the prompt."""
    prompt = params.messages[0].content.text
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text=f"echo of {prompt!r}"),
        model="python-echo",
        stop_reason="endTurn",
    )


@asynccontextmanager
async def session(streams):
    read, write = streams[0], streams[1]
    async with ClientSession(read, write, sampling_callback=lend_model) as client:
        info = await client.initialize()
        check(info.server_info.name == "agentsite", "initialize: the server is agentsite")
        yield client


async def all_tools(client):
    names, cursor = [], None
    while True:
        page = await client.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        names += [tool.name for tool in page.tools]
        cursor = page.next_cursor
        if not cursor:
            return names


async def calculator_checks(client, prefix):
    names = await all_tools(client)
    check(f"{prefix}add" in names and f"{prefix}divide" in names, f"tools/list has {prefix}add and {prefix}divide")

    result = await client.call_tool(f"{prefix}add", {"a": 2, "b": 3})
    check(not result.is_error and result.structured_content == {"result": 5.0}, "add 2 + 3 = 5 (structured)")

    result = await client.call_tool(f"{prefix}divide", {"a": 1, "b": 0})
    check(result.is_error and "division by zero" in text_of(result), "divide by zero is a tool error (isError)")

    result = await client.call_tool(f"{prefix}add", {"a": "two", "b": 3})
    check(result.is_error and "invalid arguments" in text_of(result), "arguments breaking the schema are a tool error")

    try:
        await client.call_tool(f"{prefix}nope", {})
        check(False, "an unknown tool is refused")
    except MCPError as error:
        check(error.code == -32602, "an unknown tool is JSON-RPC error -32602")


async def over_http(url):
    async with streamable_http_client(f"{url}/mcp") as streams, session(streams) as client:
        await calculator_checks(client, "calculator.")
        result = await client.call_tool("text.word_count", {"text": "one two three"})
        check(result.structured_content["words"] == 3, "text.word_count counts 3 words")

    async with streamable_http_client(f"{url}/agents/conformance/mcp") as streams, session(streams) as client:
        result = await client.call_tool("test_sampling", {"prompt": "hello"})
        check(text_of(result) == "LLM response: echo of 'hello'", "the agent's llm.chat reached this client's model")

        read = await client.read_resource("test://template/42/data")
        check('"id":"42"' in read.contents[0].text, "resources/read through a URI template")

        prompt = await client.get_prompt("test_prompt_with_arguments", {"arg1": "a", "arg2": "b"})
        check(prompt.messages[0].content.text == "Prompt with arguments: arg1='a', arg2='b'", "prompts/get fills in arguments")


async def over_stdio(agentsite, data_dir):
    server = StdioServerParameters(command=agentsite, args=["--data-dir", data_dir, "mcp", "calculator", "text"])
    async with stdio_client(server) as streams, session(streams) as client:
        await calculator_checks(client, "calculator.")


def main():
    mode = sys.argv[1]
    if mode == "http":
        anyio.run(over_http, sys.argv[2])
    elif mode == "stdio":
        anyio.run(over_stdio, sys.argv[2], sys.argv[3])
    else:
        sys.exit(f"unknown mode {mode!r}: use http or stdio")
    print(f"python mcp client over {mode}: all checks passed")


if __name__ == "__main__":
    main()
