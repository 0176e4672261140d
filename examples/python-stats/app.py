"""Statistics of numbers, with Python's standard library: an agent for
people and models who have a column of figures and a question about it."""

import statistics
from dataclasses import dataclass
from typing import Literal

from agentsite import Agent, ToolError

agent = Agent(
    "stats",
    version="0.1.0",
    description="Descriptive statistics, correlation, linear regression and histograms of numbers.",
    tags=["math", "statistics", "data", "python"],
)


@dataclass
class Summary:
    """What a list of numbers looks like.

    Attributes:
        count: how many numbers
        mean: their arithmetic mean
        median: the middle value
        stdev: sample standard deviation (0 for one number)
        minimum: the smallest
        maximum: the largest
        quartiles: the 25th, 50th and 75th percentiles
    """

    count: int
    mean: float
    median: float
    stdev: float
    minimum: float
    maximum: float
    quartiles: list[float]


def _need(values: list[float], at_least: int, what: str) -> None:
    if len(values) < at_least:
        raise ToolError(f"{what} needs at least {at_least} numbers, got {len(values)}")


@agent.tool(read_only=True, idempotent=True)
def summarize(values: list[float]) -> Summary:
    """Count, mean, median, standard deviation, extremes and quartiles of some numbers.

    Args:
        values: the numbers
    """
    _need(values, 1, "a summary")
    quartiles = statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else values * 3
    return Summary(
        count=len(values),
        mean=statistics.fmean(values),
        median=statistics.median(values),
        stdev=statistics.stdev(values) if len(values) > 1 else 0.0,
        minimum=min(values),
        maximum=max(values),
        quartiles=quartiles,
    )


@agent.tool(read_only=True, idempotent=True)
def correlate(x: list[float], y: list[float], method: Literal["pearson", "spearman"] = "pearson") -> float:
    """How strongly two series move together, from -1 to 1.

    Args:
        x: the first series
        y: the second series, as long as the first
        method: pearson (linear) or spearman (ranks)
    """
    if len(x) != len(y):
        raise ToolError(f"the series differ in length: {len(x)} and {len(y)}")
    _need(x, 2, "a correlation")
    try:
        return statistics.correlation(x, y, method="ranked" if method == "spearman" else "linear")
    except statistics.StatisticsError as e:
        raise ToolError(str(e)) from None


@dataclass
class Line:
    """A fitted line y = slope * x + intercept.

    Attributes:
        slope: change of y per unit of x
        intercept: y at x = 0
        r_squared: the share of y's variance the line explains
    """

    slope: float
    intercept: float
    r_squared: float


@agent.tool(read_only=True, idempotent=True)
def regress(x: list[float], y: list[float]) -> Line:
    """Fits a straight line to points by least squares.

    Args:
        x: the points' x values
        y: their y values
    """
    if len(x) != len(y):
        raise ToolError(f"the series differ in length: {len(x)} and {len(y)}")
    _need(x, 2, "a regression")
    try:
        fit = statistics.linear_regression(x, y)
        r = statistics.correlation(x, y)
    except statistics.StatisticsError as e:
        raise ToolError(str(e)) from None
    return Line(fit.slope, fit.intercept, r * r)


@agent.tool(read_only=True, idempotent=True)
def histogram(values: list[float], bins: int = 10) -> str:
    """A text histogram of some numbers, one line per bin.

    Args:
        values: the numbers
        bins: how many equal-width bins (1 to 50)
    """
    _need(values, 1, "a histogram")
    if not 1 <= bins <= 50:
        raise ToolError(f"bins must be from 1 to 50, got {bins}")
    low, high = min(values), max(values)
    width = (high - low) / bins or 1.0
    counts = [0] * bins
    for v in values:
        counts[min(int((v - low) / width), bins - 1)] += 1
    most = max(counts)
    lines = []
    for i, count in enumerate(counts):
        start = low + i * width
        bar = "#" * round(40 * count / most) if most else ""
        lines.append(f"{start:>12.4g} | {bar} {count}")
    return "\n".join(lines)
