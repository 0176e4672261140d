"""The official A2A Python SDK at its last 0.3 release (a2a-sdk 0.3.26, in
a virtualenv of its own: requirements-a2a-0.3.txt), for tests/a2a.rs.

    python a2a_0_3.py client http://127.0.0.1:PORT
        reads the calculator agent's card as a 0.3 client, sends it a
        message (answered whole, then streamed), reads the task back with
        tasks/get, and prints one JSON object of what it saw.

    python a2a_0_3.py tasks http://127.0.0.1:PORT
        against the courier agent: a message sent without blocking (a long
        wait) is followed with tasks/resubscribe to its end; another is
        cancelled with tasks/cancel, and cancelled again; prints one JSON
        object of what it saw.

    python a2a_0_3.py serve
        serves a 0.3 agent ("echo": answers with the text it was sent,
        upper-cased, as a completed task's artifact); prints
        `listening on http://127.0.0.1:PORT`, then runs until killed.
"""

import asyncio
import json
import socket
import sys
import uuid

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import (
    DataPart,
    Message,
    Part,
    Role,
    TaskIdParams,
    TaskQueryParams,
    TextPart,
)


def message(parts) -> Message:
    return Message(role=Role.user, parts=parts, message_id=str(uuid.uuid4()))


def add(a, b) -> Message:
    """A message naming the call itself (the agent card says how)."""
    call = {"tool": "add", "arguments": {"a": a, "b": b}}
    return message([Part(root=DataPart(data=call))])


def artifact_data(task) -> list:
    return [
        part.root.data
        for artifact in task.artifacts or []
        for part in artifact.parts
        if isinstance(part.root, DataPart)
    ]


async def client(base: str) -> None:
    seen: dict = {}
    async with httpx.AsyncClient(timeout=60) as http:
        card = await A2ACardResolver(http, f"{base}/agents/calculator").get_agent_card()
        seen["card"] = {
            "name": card.name,
            "protocol_version": card.protocol_version,
            "url": card.url,
            "transport": card.preferred_transport,
            "skills": [s.id for s in card.skills],
        }

        whole = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
        async for event in whole.send_message(add(2, 3)):
            task, _ = event
            seen["sent"] = {
                "state": task.status.state.value,
                "data": artifact_data(task),
                "kind": task.kind,
            }
            read = await whole.get_task(TaskQueryParams(id=task.id))
            seen["read_back"] = {"id": read.id == task.id, "state": read.status.state.value}
            break

        streamed = ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create(card)
        kinds = []
        final = None
        async for event in streamed.send_message(add(40, 2)):
            task, update = event
            kinds.append(update.kind if update is not None else task.kind)
            final = task
        seen["streamed"] = {
            "kinds": kinds,
            "state": final.status.state.value,
            "data": artifact_data(final),
        }
    print(json.dumps(seen))


def wait(millis: int) -> Message:
    call = {"tool": "wait", "arguments": {"millis": millis}}
    return message([Part(root=DataPart(data=call))])


async def tasks(base: str) -> None:
    seen: dict = {}
    async with httpx.AsyncClient(timeout=60) as http:
        card = await A2ACardResolver(http, f"{base}/agents/courier").get_agent_card()
        # polling: message/send with blocking false, answered at once.
        at_once = ClientFactory(
            ClientConfig(httpx_client=http, streaming=False, polling=True)
        ).create(card)
        streaming = ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create(card)

        async for event in at_once.send_message(wait(1500)):
            task, _ = event
            seen["followed_started"] = task.status.state.value
            states = []
            async for followed, update in streaming.resubscribe(TaskIdParams(id=task.id)):
                states.append(
                    update.status.state.value
                    if update is not None and hasattr(update, "status")
                    else followed.status.state.value
                )
                final = followed
            seen["followed"] = {"states": states, "state": final.status.state.value,
                                "data": artifact_data(final)}
            break

        async for event in at_once.send_message(wait(9000)):
            task, _ = event
            seen["cancel_started"] = task.status.state.value
            cancelled = await at_once.cancel_task(TaskIdParams(id=task.id))
            seen["cancelled"] = cancelled.status.state.value
            try:
                await at_once.cancel_task(TaskIdParams(id=task.id))
                seen["cancel_again"] = "cancelled"
            except Exception as e:  # the SDK's error for a finished task
                seen["cancel_again"] = f"{type(e).__name__}: {e}"
            read = await at_once.get_task(TaskQueryParams(id=task.id))
            seen["read_back"] = read.status.state.value
            break
    print(json.dumps(seen))


def serve() -> None:
    import uvicorn
    from a2a.server.agent_execution import AgentExecutor, RequestContext
    from a2a.server.apps import A2AStarletteApplication
    from a2a.server.events import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
    from a2a.types import AgentCapabilities, AgentCard, AgentSkill

    class Echo(AgentExecutor):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            updater = TaskUpdater(event_queue, context.task_id, context.context_id)
            await updater.submit()
            await updater.start_work()
            await updater.add_artifact([Part(root=TextPart(text=context.get_user_input().upper()))])
            await updater.complete()

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()

    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    # Listening before saying so: a client that connects at once waits in
    # the backlog until the server accepts.
    listener.listen(128)
    port = listener.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    card = AgentCard(
        name="echo",
        description="Says back what it was sent, in capitals (an A2A 0.3 agent).",
        version="1.0.0",
        url=url,
        protocol_version="0.3.0",
        preferred_transport="JSONRPC",
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(
                id="shout",
                name="Shout",
                description="Answers with the message's text in capitals.",
                tags=["echo", "text"],
            )
        ],
    )
    handler = DefaultRequestHandler(agent_executor=Echo(), task_store=InMemoryTaskStore())
    app = A2AStarletteApplication(agent_card=card, http_handler=handler).build()
    print(f"listening on {url}", flush=True)
    config = uvicorn.Config(app, log_level="warning")
    asyncio.run(uvicorn.Server(config).serve(sockets=[listener]))


if __name__ == "__main__":
    if sys.argv[1] == "client":
        asyncio.run(client(sys.argv[2]))
    elif sys.argv[1] == "tasks":
        asyncio.run(tasks(sys.argv[2]))
    else:
        serve()
