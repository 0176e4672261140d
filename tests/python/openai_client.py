"""The official OpenAI Python client (`openai` on PyPI) as a client of a
node's `/v1` endpoint, which serves the embedded default model.

Run by tests/python_client.rs:

    python openai_client.py <base-url> <token>

Lists the models, asks one question whole and streamed (greedy decoding,
so both answers are the same text), has the model call a tool (required,
and named while streaming, and on its own with "auto" when the question
plainly needs one, then answer with the tool's result) and answer in a
JSON schema, and checks the
errors a client sees
for an unknown model, a request the node refuses and a wrong token. Prints
one line per check and exits non-zero at the first failure.
"""

import json
import re
import sys

import openai
from openai import OpenAI

QUESTION = "What is the capital of France? Answer in one sentence."


def check(condition, what):
    if not condition:
        raise AssertionError(what)
    print(f"ok: {what}")


def main(base, token):
    client = OpenAI(base_url=f"{base}/v1", api_key=token, max_retries=0, timeout=300)

    models = [model.id for model in client.models.list()]
    check(models == ["local"], f"models.list names the embedded model: {models}")

    messages = [{"role": "user", "content": QUESTION}]
    whole = client.chat.completions.create(
        model="local", messages=messages, temperature=0, max_tokens=40
    )
    answer = whole.choices[0].message.content
    check("Paris" in answer, f"a whole answer: {answer!r}")
    check(whole.choices[0].finish_reason == "stop", "the model ended its turn")
    check(whole.usage.prompt_tokens > 10, f"usage counts the prompt: {whole.usage}")
    check(
        whole.usage.completion_tokens > 3,
        f"usage counts the answer: {whole.usage}",
    )
    check(whole.id.startswith("chatcmpl-"), f"the answer has an id: {whole.id}")

    pieces, finish, usage = [], None, None
    stream = client.chat.completions.create(
        model="local",
        messages=messages,
        temperature=0,
        max_tokens=40,
        stream=True,
        stream_options={"include_usage": True},
    )
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            if choice.delta.content:
                pieces.append(choice.delta.content)
            if choice.finish_reason:
                finish = choice.finish_reason
    check(len(pieces) > 3, f"the answer streams in {len(pieces)} pieces")
    check("".join(pieces) == answer, "streamed and whole answers are the same text")
    check(finish == "stop", "the stream ends with finish_reason stop")
    check(
        usage is not None and usage.completion_tokens == whole.usage.completion_tokens,
        f"the last chunk carries the usage: {usage}",
    )

    # The default model when none is named: the OpenAI API requires a model
    # name, so clients send one; an empty one means the node's default.
    short = client.chat.completions.create(
        model="", messages=messages, temperature=0, max_tokens=3
    )
    check(short.choices[0].finish_reason == "length", "max_tokens stops the answer")
    check(short.usage.completion_tokens == 3, "exactly max_tokens tokens")

    # Tool calls, whole and streamed, and structured output.
    weather = {
        "type": "function",
        "function": {
            "name": "weather",
            "description": "The weather forecast for a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
    ask = [{"role": "user", "content": "What's the weather like in Paris today?"}]
    called = client.chat.completions.create(
        model="local",
        messages=ask,
        tools=[weather],
        tool_choice="required",
        temperature=0,
        max_tokens=60,
    )
    choice = called.choices[0]
    check(choice.finish_reason == "tool_calls", "a required tool call ends the turn")
    call = choice.message.tool_calls[0]
    arguments = json.loads(call.function.arguments)
    check(
        call.function.name == "weather" and isinstance(arguments["city"], str),
        f"the model calls the tool: {call.function.name}({arguments})",
    )

    streamed_calls = {}
    for chunk in client.chat.completions.create(
        model="local",
        messages=ask,
        tools=[weather],
        tool_choice={"type": "function", "function": {"name": "weather"}},
        temperature=0,
        max_tokens=60,
        stream=True,
    ):
        for delta_choice in chunk.choices:
            for piece in delta_choice.delta.tool_calls or []:
                entry = streamed_calls.setdefault(piece.index, {"name": "", "arguments": ""})
                if piece.function.name:
                    entry["name"] += piece.function.name
                if piece.function.arguments:
                    entry["arguments"] += piece.function.arguments
    check(
        streamed_calls.get(0, {}).get("name") == "weather"
        and json.loads(streamed_calls[0]["arguments"]) == arguments,
        f"the streamed call is the same call: {streamed_calls}",
    )

    # tool_choice "auto": a question a tool plainly answers makes the call,
    # with the question's numbers; the answer after it states the result.
    def arithmetic(name, description):
        return {
            "type": "function",
            "function": {
                "name": name,
                "description": description,
                "parameters": {
                    "type": "object",
                    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                    "required": ["a", "b"],
                },
            },
        }

    sums = [arithmetic("add", "Add two numbers."), arithmetic("multiply", "Multiply two numbers.")]
    ask = [{"role": "user", "content": "What is 17 plus 25?"}]
    auto = client.chat.completions.create(
        model="local", messages=ask, tools=sums, temperature=0, max_tokens=60
    )
    choice = auto.choices[0]
    call = (choice.message.tool_calls or [None])[0]
    check(
        choice.finish_reason == "tool_calls"
        and call.function.name == "add"
        and json.loads(call.function.arguments) == {"a": 17, "b": 25},
        f"auto calls the tool a question plainly needs: {choice.message}",
    )
    answered = client.chat.completions.create(
        model="local",
        messages=ask
        + [
            choice.message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "42.0"},
        ],
        tools=sums,
        temperature=0,
        max_tokens=60,
    )
    said = answered.choices[0].message.content or ""
    numbers = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", said)]
    check(
        42.0 in numbers and all(n in (17.0, 25.0, 42.0) for n in numbers),
        f"the answer states the tool's result and no other number: {said!r}",
    )

    # A tool loop as OpenAI clients run it, with a converter whose units are
    # symbols and whose error lists them: the refused call is made again
    # from what the tool said, and the answer states the converted amount.
    known = {"km": 1000.0, "mi": 1609.344, "gal": 3.785411784, "l": 1.0}
    convert = {
        "type": "function",
        "function": {
            "name": "convert",
            "description": "Convert an amount from one unit to another.",
            "parameters": {
                "type": "object",
                "properties": {
                    "amount": {"type": "number"},
                    "from_unit": {"type": "string"},
                    "to_unit": {"type": "string"},
                },
                "required": ["amount", "from_unit", "to_unit"],
            },
        },
    }

    def run_convert(arguments):
        for unit in (arguments.get("from_unit"), arguments.get("to_unit")):
            if unit not in known:
                return f'error: unknown unit "{unit}"; known units: {", ".join(known)}'
        amount = float(arguments.get("amount", 0))
        return str(round(amount * known[arguments["from_unit"]] / known[arguments["to_unit"]], 2))

    loop = [{"role": "user", "content": "Convert 5 gallons to liters"}]
    made = []
    said = None
    for _ in range(4):
        turn = client.chat.completions.create(
            model="local", messages=loop, tools=[convert], temperature=0, max_tokens=80
        )
        message = turn.choices[0].message
        if not message.tool_calls:
            said = message.content or ""
            break
        loop.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            arguments = json.loads(call.function.arguments)
            made.append(arguments)
            loop.append(
                {"role": "tool", "tool_call_id": call.id, "content": run_convert(arguments)}
            )
    check(
        any(m.get("from_unit") == "gal" and m.get("to_unit") == "l" for m in made),
        f"a refused call is made again with the units the tool listed: {made}",
    )
    check(
        said is not None and "18.93" in said,
        f"the loop's answer states the converted amount: {said!r} after {made}",
    )
    chat = client.chat.completions.create(
        model="local",
        messages=[{"role": "user", "content": "Hello! How are you today?"}],
        tools=sums,
        temperature=0,
        max_tokens=40,
    )
    said = chat.choices[0].message.content or ""
    check(
        not chat.choices[0].message.tool_calls
        and said
        and not said.startswith("I cannot answer"),
        f"small talk is answered in words: {said!r}",
    )
    # A question the tools offered cannot take is not answered from the
    # tiny model's memory: a name the question does not hold is never
    # stated (the reply says it cannot answer instead).
    asked = "Who is the president of France?"
    reply = client.chat.completions.create(
        model="local",
        messages=[{"role": "user", "content": asked}],
        tools=sums,
        temperature=0,
        max_tokens=40,
    ).choices[0].message.content or ""
    names = [
        word.strip(".,!?;:'\"")
        for sentence in re.split(r"(?<=[.!?])\s+", reply)
        for word in sentence.split()[1:]
        if word[:1].isupper() and not word.startswith("I'") and word != "I"
    ]
    unsaid = [name for name in names if name.lower() not in asked.lower() + " add multiply"]
    check(
        not unsaid,
        f"a question no tool takes states no name of the model's own: {reply!r}",
    )

    structured = client.chat.completions.create(
        model="local",
        messages=[{"role": "user", "content": "What is the capital of France?"}],
        response_format={
            "type": "json_schema",
            "json_schema": {
                "name": "capital",
                "strict": True,
                "schema": {
                    "type": "object",
                    "properties": {"city": {"type": "string", "maxLength": 40}},
                    "required": ["city"],
                    "additionalProperties": False,
                },
            },
        },
        temperature=0,
        max_tokens=40,
    )
    value = json.loads(structured.choices[0].message.content)
    check(
        list(value) == ["city"] and isinstance(value["city"], str),
        f"a structured answer matches its schema: {value}",
    )

    try:
        client.chat.completions.create(model="gpt-9", messages=messages)
        check(False, "an unknown model is refused")
    except openai.NotFoundError as error:
        check("no model \"gpt-9\"" in error.message, f"unknown model: {error.message}")

    try:
        client.chat.completions.create(
            model="local", messages=[{"role": "wizard", "content": "hi"}]
        )
        check(False, "a bad role is refused")
    except openai.BadRequestError as error:
        check("role \"wizard\"" in error.message, f"bad request: {error.message}")

    try:
        client.chat.completions.create(model="local", messages=messages, max_tokens=-1)
        check(False, "a negative max_tokens is refused")
    except openai.BadRequestError as error:
        check(
            error.body["message"]
            == "max_tokens: expected a whole number, 0 or more, got the integer -1"
            and error.param == "max_tokens",
            f"a bad field is named: {error.message} (param {error.param})",
        )

    try:
        client.chat.completions.create(
            model="local", messages=[{"role": "user", "content": "word " * 5000}]
        )
        check(False, "a prompt longer than the context is refused")
    except openai.BadRequestError as error:
        check("takes at most" in error.message, f"too long: {error.message}")

    # The same with tools: the node plays the tool loop, and a conversation
    # too long for its model is still the request's fault (400), not the
    # node's (503).
    try:
        client.chat.completions.create(
            model="local",
            messages=[{"role": "user", "content": "What is 17 plus 25? " + "word " * 5000}],
            tools=sums,
            max_tokens=60,
        )
        check(False, "a prompt with tools longer than the context is refused")
    except openai.BadRequestError as error:
        check("takes at most" in error.message, f"too long with tools: {error.message}")

    stranger = OpenAI(base_url=f"{base}/v1", api_key="wrong", max_retries=0)
    try:
        stranger.models.list()
        check(False, "a wrong token is refused")
    except openai.AuthenticationError as error:
        check(error.status_code == 401, "a wrong token gets 401")

    print("all checks passed")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
