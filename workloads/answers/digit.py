"""One-digit answers of the learnable format task: the first digit the response writes.

A tiny random model cannot learn GSM8K, so the format task (dataset `gsm8k-format`) asks it to reply with one
digit; the reply is judged on its first digit, so a model that has learnt the task writes no other digit first.

extract("7 and then 3")   # '7'
matches("7", "7")         # True
"""

from __future__ import annotations

import re

_DIGIT = re.compile(r"\d")


def extract(response: str) -> str | None:
    """The first digit of the response, or None when it has none."""
    found = _DIGIT.search(response)
    return found.group(0) if found else None


def matches(predicted: str, ground_truth: str) -> bool:
    return predicted.strip() == ground_truth.strip()
