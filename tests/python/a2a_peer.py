"""A2A peers that misbehave, for tests/a2a.rs. Each serves the wordsmith
example's Agent Card; what answers its messages is wrong in one way:

    python a2a_peer.py MODE

- `stuck`: the a2a-sdk server, whose tasks work forever (never finish);
  prints `cancelled TASK` when the node cancels one.
- `malformed`: answers every JSON-RPC request with a body that is not JSON.
- `endless`: answers with a body that never ends (a byte every 50 ms).
- `huge`: answers with a well-formed result of 64 MiB.

The first line printed is `listening on http://127.0.0.1:PORT`.
"""

import asyncio
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "examples/python-a2a-wordsmith"))

from agent import app, card, serve  # noqa: E402
from a2a.server.agent_execution import AgentExecutor, RequestContext  # noqa: E402
from a2a.server.events import EventQueue  # noqa: E402
from a2a.server.routes import create_agent_card_routes  # noqa: E402
from a2a.server.tasks import TaskUpdater  # noqa: E402
from a2a.types.a2a_pb2 import Task, TaskState, TaskStatus  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from starlette.responses import Response, StreamingResponse  # noqa: E402
from starlette.routing import Route  # noqa: E402


class Stuck(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        await event_queue.enqueue_event(
            Task(
                id=context.task_id,
                context_id=context.context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_WORKING),
            )
        )
        await asyncio.sleep(3600)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        print(f"cancelled {context.task_id}", flush=True)
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


async def malformed(request):
    await request.body()
    return Response('{"jsonrpc": "2.0", "result": {"task": ', media_type="application/json")


async def endless(request):
    await request.body()

    async def drip():
        yield b'{"jsonrpc": "2.0", "result": {"task": {"id": "'
        while True:
            await asyncio.sleep(0.05)
            yield b"x"

    return StreamingResponse(drip(), media_type="application/json")


async def huge(request):
    body = json.loads(await request.body())
    text = "x" * (64 << 20)
    answer = {"jsonrpc": "2.0", "id": body.get("id"), "result": {"message": {
        "messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": text}]}}}
    return Response(json.dumps(answer), media_type="application/json")


def raw(handler):
    return lambda base: Starlette(
        routes=create_agent_card_routes(card(base)) + [Route("/", handler, methods=["POST"])]
    )


if __name__ == "__main__":
    mode = sys.argv[1]
    makers = {
        "stuck": lambda base: app(base, Stuck()),
        "malformed": raw(malformed),
        "endless": raw(endless),
        "huge": raw(huge),
    }
    serve(0, makers[mode])
