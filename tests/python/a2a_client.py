"""The official A2A Python SDK's client against a node: reads the node's and
an agent's Agent Cards, sends messages (answered at once and streamed),
reads, lists and cancels tasks, and gives the node a goal. Prints one JSON
object of what it saw, for tests/a2a.rs to check.

    python a2a_client.py http://127.0.0.1:PORT
"""

import asyncio
import json
import sys

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers.proto_helpers import (
    get_artifact_text,
    get_message_text,
    new_data_part,
    new_message,
    new_text_message,
)
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Role,
    SendMessageRequest,
    TaskState,
)
from google.protobuf.json_format import MessageToDict


def state(task) -> str:
    return TaskState.Name(task.status.state)


def artifacts(task) -> list[str]:
    return [get_artifact_text(a) for a in task.artifacts]


async def one_task(client, message):
    """Sends `message` and returns the task it ends as (the client is not
    streaming: one answer)."""
    async for event in client.send_message(SendMessageRequest(message=message)):
        return event.task
    raise AssertionError("no answer")


async def main(base: str) -> None:
    seen: dict = {}
    async with httpx.AsyncClient(timeout=60) as http:
        node_card = await A2ACardResolver(http, base).get_agent_card()
        seen["node_card"] = {
            "name": node_card.name,
            "skills": [s.id for s in node_card.skills],
            "url": node_card.supported_interfaces[0].url,
            "streaming": node_card.capabilities.streaming,
        }
        card = await A2ACardResolver(http, f"{base}/agents/calculator").get_agent_card()
        seen["agent_card"] = {
            "name": card.name,
            "skills": [s.id for s in card.skills],
            "url": card.supported_interfaces[0].url,
        }

        answered = ClientFactory(ClientConfig(streaming=False)).create(card)
        streaming = ClientFactory(ClientConfig(streaming=True)).create(card)
        polling = ClientFactory(ClientConfig(streaming=False, polling=True)).create(card)

        # A message the node's model turns into a call.
        task = await one_task(
            answered, new_text_message("Add 2 and 3.", role=Role.ROLE_USER)
        )
        seen["chosen"] = {
            "state": state(task),
            "artifacts": artifacts(task),
            "data": [
                MessageToDict(p.data) for a in task.artifacts for p in a.parts if p.HasField("data")
            ],
            "said": get_message_text(task.status.message),
            "history": len(task.history),
        }
        chosen_id = task.id

        # A call named in a data part, streamed.
        named = new_message(
            [new_data_part({"tool": "multiply", "arguments": {"a": 6, "b": 7}})],
            role=Role.ROLE_USER,
        )
        events = []
        async for event in streaming.send_message(SendMessageRequest(message=named)):
            kind = event.WhichOneof("payload")
            if kind == "task":
                events.append(["task", state(event.task)])
            elif kind == "status_update":
                events.append(["status", TaskState.Name(event.status_update.status.state)])
            elif kind == "artifact_update":
                events.append(["artifact", get_artifact_text(event.artifact_update.artifact)])
            else:
                events.append([kind])
        seen["streamed"] = events

        # The first task, read back; the agent's tasks, listed.
        task = await answered.get_task(GetTaskRequest(id=chosen_id))
        seen["got"] = {"state": state(task), "artifacts": artifacts(task)}
        listed = await answered.list_tasks(ListTasksRequest())
        seen["listed"] = {
            "count": len(listed.tasks),
            "total": listed.total_size,
            "states": sorted(state(t) for t in listed.tasks),
        }
        try:
            await answered.get_task(GetTaskRequest(id="no-such-task"))
            seen["missing"] = "found"
        except Exception as e:  # the SDK's TaskNotFoundError
            seen["missing"] = type(e).__name__

        # A message the model is slow to act on, cancelled while it waits.
        slow = await one_task(
            polling, new_text_message("Take your time: add 1 and 1.", role=Role.ROLE_USER)
        )
        seen["slow_started"] = state(slow)
        cancelled = await polling.cancel_task(CancelTaskRequest(id=slow.id))
        seen["cancelled"] = state(cancelled)
        try:
            await polling.cancel_task(CancelTaskRequest(id=slow.id))
            seen["cancel_again"] = "cancelled"
        except Exception as e:  # the SDK's TaskNotCancelableError
            seen["cancel_again"] = type(e).__name__

        # A goal, given to the node.
        node = ClientFactory(ClientConfig(streaming=True)).create(node_card)
        goal = new_text_message("Multiply 6 by 7.", role=Role.ROLE_USER)
        goal.metadata.update({"team": ["calculator"]})
        last = None
        updates = 0
        async for event in node.send_message(SendMessageRequest(message=goal)):
            kind = event.WhichOneof("payload")
            if kind == "task":
                last = event.task
            elif kind == "status_update":
                updates += 1
                last_state = TaskState.Name(event.status_update.status.state)
                seen.setdefault("goal_states", []).append(last_state)
        seen["goal_updates"] = updates
        goal_task = await node.get_task(GetTaskRequest(id=last.id))
        seen["goal"] = {"state": state(goal_task), "artifacts": artifacts(goal_task)}

        for client in (answered, streaming, polling, node):
            await client.close()
    print(json.dumps(seen))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
