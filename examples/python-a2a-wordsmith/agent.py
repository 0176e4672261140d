"""A small A2A agent written with the official A2A Python SDK (a2a-sdk):
it reverses the words of a text and counts them. Nothing here knows about
agentsite: attach it to a node by its URL and its skills become tools of an
agent of the node.

    python examples/python-a2a-wordsmith/agent.py 8766
    agentsite attach wordsmith http://127.0.0.1:8766

`python agent.py 0` listens on a free port; the first line it prints is
`listening on http://127.0.0.1:PORT`.
"""

import asyncio
import socket
import sys

import uvicorn
from a2a.helpers.proto_helpers import new_data_part, new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Role,
    Task,
    TaskState,
    TaskStatus,
)
from starlette.applications import Starlette


def card(base: str) -> AgentCard:
    return AgentCard(
        name="Wordsmith",
        description="Reverses the order of words and counts them.",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=f"{base}/", protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain", "application/json"],
        skills=[
            AgentSkill(
                id="reverse",
                name="Reverse words",
                description="Says the words of the message in reverse order.",
                tags=["text"],
                examples=["one two three"],
            ),
            AgentSkill(
                id="count",
                name="Count words",
                description="Counts the words of the message.",
                tags=["text"],
                examples=["how many words is this"],
            ),
        ],
    )


class Wordsmith(AgentExecutor):
    """Works each message as a task: working, then the answer as an
    artifact, then completed. The skill asked for is in the message's
    metadata (`skill`); without one, the words are reversed."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        text = context.get_user_input()
        skill = message.metadata["skill"] if message and "skill" in message.metadata else "reverse"
        await event_queue.enqueue_event(
            Task(
                id=context.task_id,
                context_id=context.context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                history=[message] if message else [],
            )
        )
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.start_work()
        words = text.split()
        if skill == "count":
            parts = [new_text_part(f"{len(words)} words"), new_data_part({"words": len(words)})]
        elif skill == "reverse":
            parts = [new_text_part(" ".join(reversed(words)))]
        else:
            await updater.failed(
                new_text_message(f"no skill {skill!r}", role=Role.ROLE_AGENT)
            )
            return
        await updater.add_artifact(parts, name=skill)
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.cancel()


def app(base: str, executor: AgentExecutor) -> Starlette:
    agent_card = card(base)
    handler = DefaultRequestHandler(
        agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=agent_card
    )
    routes = create_agent_card_routes(agent_card) + create_jsonrpc_routes(handler, "/")
    return Starlette(routes=routes)


def serve(port: int, make_app) -> None:
    """Serves the app `make_app(base)` makes on 127.0.0.1:`port` (a free
    one for 0), saying where first."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    # Listening before saying so: a client that connects at once waits in
    # the backlog until the server accepts.
    sock.listen(128)
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    print(f"listening on {base}", flush=True)
    config = uvicorn.Config(make_app(base), log_level="warning")
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    serve(int(sys.argv[1]) if len(sys.argv) > 1 else 8766, lambda base: app(base, Wordsmith()))
