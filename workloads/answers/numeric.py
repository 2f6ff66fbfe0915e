"""GSM8K-style numeric answers: the number after the last `####`, else the last number.

extract("... so she makes #### $18.")   # '18'
matches("18", "18.0")                   # True
"""

from __future__ import annotations

import math
import re

from rlbench.harness.errors import RLBenchError

# Answers are integers or short decimals, so anything beyond float noise is a
# different answer.
_ABS_TOL = 1e-6
_REL_TOL = 1e-9

# A number as written in prose: optional sign and `$`, thousands groups or plain
# digits, optional decimals; also `.5`. Strict thousands grouping keeps a list
# like "1,2,3" from turning into 123.
_NUMBER = re.compile(
    r"(?<![\w.])(?P<sign>[-+\u2212]?)\s*\$?\s*"
    r"(?P<num>(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)"
)


def reference(answer_field: str) -> str:
    """The reference number of a GSM8K `answer` field (text after `####`), commas removed."""
    tail = answer_field.rsplit("####", 1)[-1] if "####" in answer_field else answer_field
    number = _first_number(tail)
    if number is None:
        raise RLBenchError(f"GSM8K answer has no number after '####': {answer_field[-80:]!r}")
    return number


def extract(response: str) -> str | None:
    """The response's final number, or None when it has none."""
    # The GSM8K format puts the final answer after `####`; models that skip it are
    # judged on their last number, the usual convention of GSM8K evaluations.
    if "####" in response:
        number = _first_number(response.rsplit("####", 1)[1])
        if number is not None:
            return number
    return _last_number(response)


def matches(predicted: str, ground_truth: str) -> bool:
    """Whether an extracted number equals the reference (given bare or as a GSM8K answer field)."""
    return _numbers_equal(predicted, reference(ground_truth))


def _clean_number(match: re.Match[str]) -> str:
    sign = "-" if match.group("sign") in ("-", "\u2212") else ""
    return sign + match.group("num").replace(",", "")


def _first_number(text: str) -> str | None:
    match = _NUMBER.search(text)
    return _clean_number(match) if match else None


def _last_number(text: str) -> str | None:
    matches_ = list(_NUMBER.finditer(text))
    return _clean_number(matches_[-1]) if matches_ else None


def _numbers_equal(a: str, b: str) -> bool:
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    return math.isclose(x, y, rel_tol=_REL_TOL, abs_tol=_ABS_TOL)
