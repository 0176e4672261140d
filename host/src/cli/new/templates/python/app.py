"""The agent __NAME__. Each function marked `@agent.tool` is a tool: its
docstring is the tool's description (its `Args:` describe the arguments),
its type hints make the input schema (checked before the function runs),
and what it returns is the result: a `str` as text, a dataclass as
structured content with an output schema. `raise ToolError("why")` is a
tool error the caller reads."""

from dataclasses import dataclass

from agentsite import Agent, ToolError

agent = Agent(
    "__NAME__",
    version="0.1.0",
    description="What __NAME__ does, in a sentence: people and other agents find it by these words.",
    tags=["example"],
)


@agent.tool(read_only=True, idempotent=True)
def greet(name: str, greeting: str = "Hello") -> str:
    """Greets someone by name.

    Args:
        name: who to greet
        greeting: the words to greet them with, such as "Good morning"
    """
    return f"{greeting}, {name}!"


@dataclass
class Counts:
    """What a text is made of.

    Attributes:
        words: how many words it has
        characters: how many characters it has
        longest: its longest word (the first, if several are as long)
    """

    words: int
    characters: int
    longest: str


@agent.tool(read_only=True, idempotent=True)
def count(text: str) -> Counts:
    """Counts the words and characters of a text.

    Args:
        text: the text to count
    """
    words = text.split()
    if not words:
        raise ToolError("the text has no words")
    return Counts(words=len(words), characters=len(text), longest=max(words, key=len))
