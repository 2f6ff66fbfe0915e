"""The one reward function every framework adapter uses, so all frameworks score alike.

`score(dataset, response, ground_truth)` returns 1.0 for a correct final answer and
0.0 otherwise (never raising on whatever text a model produced):

- gsm8k: the number after the last `####`, else the last number in the response,
  compared numerically with the reference (`1,000` == `1000`, `$18` == `18.0`).
- math: the content of the last `\\boxed{...}` (or `\\boxed 5`, `\\fbox{...}`), checked
  for mathematical equivalence with the reference by math-verify; when math-verify
  cannot decide, a normalised string comparison.

    score("gsm8k", "... so she makes #### $18.", "18")   # 1.0
    score("math", "... \\boxed{\\dfrac{1}{2}}", "0.5")     # 1.0
"""

from __future__ import annotations

import functools
import math
import re
import threading
from typing import Any, Callable

from rlbench.errors import RLBenchError

# Per-call limit (seconds) on math-verify's parse and verify, where it can apply one.
_MATH_VERIFY_TIMEOUT_S = 5

# Longer boxed answers skip math-verify (string comparison only): no MATH answer comes
# near this, and outside the main thread a huge expression has no timeout to stop it.
_MAX_SYMBOLIC_CHARS = 400

# Tolerance for GSM8K: answers are integers or short decimals, so anything beyond
# float noise is a different answer.
_GSM8K_ABS_TOL = 1e-6
_GSM8K_REL_TOL = 1e-9


# ---------------------------------------------------------------- public API


def reward_names() -> tuple[str, ...]:
    """The dataset names `score` accepts, one reward per dataset."""
    return tuple(_SCORERS)


def score(dataset: str, response: str, ground_truth: str) -> float:
    """1.0 if `response`'s final answer matches `ground_truth` for `dataset`, else 0.0."""
    scorer = _SCORERS.get(dataset)
    if scorer is None:
        raise RLBenchError(
            f"unknown reward dataset {dataset!r}; valid datasets: {', '.join(_SCORERS)}")
    if not isinstance(response, str) or not response.strip():
        return 0.0
    return scorer(response, ground_truth)


def gsm8k_ground_truth(answer_field: str) -> str:
    """The reference number of a GSM8K `answer` field (text after `####`), commas removed."""
    tail = answer_field.rsplit("####", 1)[-1] if "####" in answer_field else answer_field
    number = _first_number(tail)
    if number is None:
        raise RLBenchError(f"GSM8K answer has no number after '####': {answer_field[-80:]!r}")
    return number


# ---------------------------------------------------------------- GSM8K

# A number as written in prose: optional sign and `$`, thousands groups or plain
# digits, optional decimals; also `.5`. Strict thousands grouping keeps a list
# like "1,2,3" from turning into 123.
_NUMBER = re.compile(
    r"(?<![\w.])(?P<sign>[-+\u2212]?)\s*\$?\s*"
    r"(?P<num>(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)"
)


def _clean_number(match: re.Match[str]) -> str:
    sign = "-" if match.group("sign") in ("-", "\u2212") else ""
    return sign + match.group("num").replace(",", "")


def _first_number(text: str) -> str | None:
    match = _NUMBER.search(text)
    return _clean_number(match) if match else None


def _last_number(text: str) -> str | None:
    matches = list(_NUMBER.finditer(text))
    return _clean_number(matches[-1]) if matches else None


def _gsm8k_answer(response: str) -> str | None:
    # The GSM8K format puts the final answer after `####`; models that skip it are
    # judged on their last number, the usual convention of GSM8K evaluations.
    if "####" in response:
        number = _first_number(response.rsplit("####", 1)[1])
        if number is not None:
            return number
    return _last_number(response)


def _numbers_equal(a: str, b: str) -> bool:
    try:
        x, y = float(a), float(b)
    except ValueError:
        return False
    return math.isclose(x, y, rel_tol=_GSM8K_REL_TOL, abs_tol=_GSM8K_ABS_TOL)


def _score_gsm8k(response: str, ground_truth: str) -> float:
    predicted = _gsm8k_answer(response)
    if predicted is None:
        return 0.0
    return 1.0 if _numbers_equal(predicted, gsm8k_ground_truth(ground_truth)) else 0.0


# ---------------------------------------------------------------- MATH: extraction

_BOX_COMMAND = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")


def last_boxed(text: str) -> str | None:
    """The content of the last `\\boxed{...}` / `\\boxed x` / `\\fbox{...}`, or None."""
    for match in reversed(list(_BOX_COMMAND.finditer(text))):
        content = _box_content(text, match.end())
        if content:
            return content
    return None


def _box_content(text: str, start: int) -> str | None:
    rest = text[start:]
    stripped = rest.lstrip()
    if stripped.startswith("{"):
        return _balanced(stripped)
    if len(stripped) == len(rest):
        return None  # nothing follows, or no space before it: not a `\boxed 5` form
    # `\boxed 5`: the argument runs to the next space or math delimiter.
    token = re.match(r"[^\s$]+", stripped)
    if token is None:
        return None
    return token.group(0).rstrip(".,;") or None


def _balanced(text: str) -> str | None:
    # text starts with "{"; escaped braces `\{ \}` are content, not grouping.
    depth, index = 0, 0
    while index < len(text):
        char = text[index]
        if char == "\\":
            index += 2
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[1:index].strip() or None
        index += 1
    return None  # unbalanced: the box never closes


# ---------------------------------------------------------------- MATH: equivalence


def _timeout_s() -> int | None:
    # math-verify times out with signal.alarm, which raises ValueError outside the main
    # thread; adapters score in worker threads, where we run without its timeout.
    if threading.current_thread() is threading.main_thread():
        return _MATH_VERIFY_TIMEOUT_S
    return None


@functools.lru_cache(maxsize=1)
def _math_verify() -> tuple[Callable[..., Any], Callable[..., Any], list[Any]]:
    # Imported on first use: it pulls in sympy (about a second) and only MATH needs it.
    from math_verify import LatexExtractionConfig, parse, verify

    # The boxed expression is the answer, so boxed matching gets top priority.
    config = [LatexExtractionConfig(boxed_match_priority=0)]
    return parse, verify, config


def _parse_boxed(content: str) -> list[Any]:
    if len(content) > _MAX_SYMBOLIC_CHARS:
        return []
    parse, _, config = _math_verify()
    try:
        return parse("\\boxed{" + content + "}", extraction_config=config,
                     parsing_timeout=_timeout_s())
    except Exception:  # noqa: BLE001 - a parser failure means "cannot decide", not an error
        return []


@functools.lru_cache(maxsize=4096)
def _parse_gold(ground_truth: str) -> tuple[Any, ...]:
    # One gold answer is scored against many sampled responses (GRPO groups), so its
    # parse is cached; parsed sympy objects are immutable.
    return tuple(_parse_boxed(ground_truth))


def _verified(gold: tuple[Any, ...], predicted: list[Any]) -> bool:
    if not gold or not predicted:
        return False
    _, verify, _ = _math_verify()
    try:
        return bool(verify(list(gold), predicted, timeout_seconds=_timeout_s()))
    except Exception:  # noqa: BLE001 - same as in _parse_boxed
        return False


def _score_math(response: str, ground_truth: str) -> float:
    boxed = last_boxed(response)
    if boxed is None:
        return 0.0
    gold_text = last_boxed(ground_truth) or ground_truth.strip()
    if _verified(_parse_gold(gold_text), _parse_boxed(boxed)):
        return 1.0
    return 1.0 if _same_normalised(gold_text, boxed) else 0.0


# ---------------------------------------------------------------- MATH: string fallback

# Rewrites that never change a value, only how it is typeset.
_SPACING = re.compile(r"\\[,;:!>]|\\quad|\\qquad|~|\s+")
_TEXT_WRAPPER = re.compile(r"\\(?:text|textbf|mathrm|mathbf|mbox)\{([^{}]*)\}")
_FRAC_VARIANTS = re.compile(r"\\[dt]frac")
_LEFT_RIGHT = re.compile(r"\\(?:left|right)(?![A-Za-z])")
_DEGREES = re.compile(r"\^\{?\\circ\}?")


def _normalise(text: str) -> str:
    text = _TEXT_WRAPPER.sub(r"\1", text)
    text = _FRAC_VARIANTS.sub(r"\\frac", text)
    text = _LEFT_RIGHT.sub("", text)
    text = _DEGREES.sub("", text)
    text = text.replace("\\$", "").replace("\\%", "").replace("$", "")
    text = _SPACING.sub("", text)
    return text.rstrip(".")


def _same_normalised(gold: str, predicted: str) -> bool:
    expected = _normalise(gold)
    return bool(expected) and expected == _normalise(predicted)


_SCORERS: dict[str, Callable[[str, str], float]] = {
    "gsm8k": _score_gsm8k,
    "math": _score_math,
}
