"""The official A2A Python SDK's client with its default settings (its own
HTTP client, whose read timeout is a few seconds) streams a goal whose work
is quiet for about ten seconds, then abandons a second one mid-way. Prints
one JSON object of what it saw, for tests/a2a.rs to check.

    python a2a_patient.py http://127.0.0.1:PORT
"""

import asyncio
import json
import sys
import time

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers.proto_helpers import get_artifact_text, new_text_message
from a2a.types.a2a_pb2 import Role, SendMessageRequest, TaskState
import httpx


def goal(text: str):
    message = new_text_message(text, role=Role.ROLE_USER)
    message.metadata.update({"team": ["calculator"]})
    return SendMessageRequest(message=message)


async def main(base: str) -> None:
    seen: dict = {}
    async with httpx.AsyncClient() as http:
        card = await A2ACardResolver(http, base).get_agent_card()

    # Default settings: no HTTP client of ours, no timeout of ours.
    client = ClientFactory(ClientConfig(streaming=True)).create(card)
    started = time.monotonic()
    states = []
    task = None
    async for event in client.send_message(goal("Slowly: multiply 6 by 7.")):
        kind = event.WhichOneof("payload")
        if kind == "task":
            task = event.task
        elif kind == "status_update":
            states.append(TaskState.Name(event.status_update.status.state))
        elif kind == "artifact_update":
            seen["artifact"] = get_artifact_text(event.artifact_update.artifact)
    seen["slow"] = {
        "seconds": time.monotonic() - started,
        "last_state": states[-1] if states else None,
        "task": task.id if task else None,
    }
    await client.close()

    # A goal abandoned once it runs: the client goes away.
    client = ClientFactory(ClientConfig(streaming=True)).create(card)
    async for event in client.send_message(goal("Forever: add 2 and 2.")):
        kind = event.WhichOneof("payload")
        if kind == "task":
            seen["abandoned"] = event.task.id
            break
    await client.close()
    print(json.dumps(seen))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
