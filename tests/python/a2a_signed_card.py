"""The official A2A Python SDK checks the signatures of a node's Agent
Cards: its card resolver fetches the node's card and an agent's card with
the SDK's signature verifier (EdDSA, the key named by the `kid` did:key),
and the same verifier refuses the cards once a field is changed. Prints one
JSON object of what it saw, for tests/a2a.rs to check.

    python a2a_signed_card.py http://127.0.0.1:PORT AGENT
"""

import asyncio
import json
import sys

import httpx
from a2a.client import A2ACardResolver
from a2a.utils.signing import InvalidSignaturesError, create_signature_verifier
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def did_key(kid):
    """The ed25519 key of a did:key (`did:key:z6Mk…#z6Mk…`), decoded here:
    base58btc after the multibase `z`, then the 0xed01 multicodec."""
    did = kid.split("#")[0]
    assert did.startswith("did:key:z"), kid
    number = 0
    for char in did[len("did:key:z"):]:
        number = number * 58 + ALPHABET.index(char)
    raw = number.to_bytes((number.bit_length() + 7) // 8, "big")
    assert raw[:2] == b"\xed\x01", kid
    return Ed25519PublicKey.from_public_bytes(raw[2:])


kids = []


def key_provider(kid, jku):
    kids.append(kid)
    return did_key(kid)


verify = create_signature_verifier(key_provider, ["EdDSA"])


async def main(base, agent):
    seen = {}
    async with httpx.AsyncClient(timeout=30) as http:
        for label, path in [
            ("node", None),
            ("agent", f"/agents/{agent}/.well-known/agent-card.json"),
        ]:
            resolver = A2ACardResolver(http, base)
            card = await resolver.get_agent_card(
                relative_card_path=path, signature_verifier=verify
            )
            tampered = type(card)()
            tampered.CopyFrom(card)
            tampered.description = card.description + " (changed)"
            try:
                verify(tampered)
                refused = False
            except InvalidSignaturesError:
                refused = True
            seen[label] = {
                "name": card.name,
                "signatures": len(card.signatures),
                "verified": True,
                "tampered_refused": refused,
            }
    seen["kids"] = kids
    print(json.dumps(seen))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
