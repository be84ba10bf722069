"""What both sides of bench/sdk-python.ts share: the record they log, and the percentile."""

QUESTION = "What is the capital of France, and what is its population?"
ANSWER = "Paris is the capital of France; about 2.1 million people live in the city proper."
META = {"model": "gpt-4o-mini", "epoch": 3, "lr": 0.001, "latency_ms": 812}


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    rank = min(len(ordered) - 1, max(0, int(round(p / 100 * len(ordered))) - 1))
    return ordered[rank]
