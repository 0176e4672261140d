"""The official OpenAI Python client (`openai` on PyPI) as a client of a
node's `/v1` endpoint, which serves the embedded default model.

Run by tests/python_client.rs:

    python openai_client.py <base-url> <token>

Lists the models, asks one question whole and streamed (greedy decoding,
so both answers are the same text), and checks the errors a client sees
for an unknown model, a request the node refuses and a wrong token. Prints
one line per check and exits non-zero at the first failure.
"""

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
        client.chat.completions.create(
            model="local", messages=[{"role": "user", "content": "word " * 5000}]
        )
        check(False, "a prompt longer than the context is refused")
    except openai.BadRequestError as error:
        check("takes at most" in error.message, f"too long: {error.message}")

    stranger = OpenAI(base_url=f"{base}/v1", api_key="wrong", max_retries=0)
    try:
        stranger.models.list()
        check(False, "a wrong token is refused")
    except openai.AuthenticationError as error:
        check(error.status_code == 401, "a wrong token gets 401")

    print("all checks passed")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
