"""A Python agent that misbehaves in every way a Python program can, for the
node's tests: each call must end with a clear error within its deadline
while the node keeps serving."""

from agentsite import Agent

agent = Agent(
    "py-hostile",
    description="Misbehaves on purpose: loops, eats memory, throws, returns nonsense.",
    tags=["test"],
)


@agent.tool
def spin() -> str:
    """Loops forever."""
    while True:
        pass


@agent.tool
def bloat() -> str:
    """Grows a list until memory runs out."""
    hoard = []
    while True:
        hoard.append(bytearray(1 << 20))


@agent.tool
def throw() -> str:
    """Raises an exception it does not handle."""
    raise KeyError("the key that was never there")


@agent.tool
def nonsense() -> object:
    """Returns something that is neither text, content nor JSON."""
    return {1, 2, 3}


@agent.tool
def recurse(depth: int = 0) -> int:
    """Recurses without end.

    Args:
        depth: how deep it already is
    """
    return recurse(depth + 1)


@agent.tool
def shout(text: str) -> str:
    """Works: upper-cases a text, so that the tests see the agent still serves.

    Args:
        text: what to shout
    """
    return text.upper()
