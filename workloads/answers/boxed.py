"""MATH-style answers: the last `\\boxed{...}`, checked for mathematical equivalence.

The content of the last `\\boxed{...}` (or `\\boxed 5`, `\\fbox{...}`) is compared with
the reference by math-verify; when math-verify cannot decide, by a normalised string
comparison.

    extract("... so \\boxed{\\dfrac{1}{2}}")   # '\\dfrac{1}{2}'
    matches("\\dfrac{1}{2}", "0.5")             # True
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable
from typing import Any

# Per-call limit (seconds) on math-verify's parse and verify, where it can apply one.
_MATH_VERIFY_TIMEOUT_S = 5

# Longer boxed answers skip math-verify (string comparison only): no MATH answer comes
# near this, and outside the main thread a huge expression has no timeout to stop it.
_MAX_SYMBOLIC_CHARS = 400


def extract(response: str) -> str | None:
    """The response's last boxed answer, or None when it has none."""
    return last_boxed(response)


def matches(predicted: str, ground_truth: str) -> bool:
    """Whether a boxed answer equals the reference (bare LaTeX, or a text holding a `\\boxed{}`)."""
    gold_text = last_boxed(ground_truth) or ground_truth.strip()
    return _verified(_parse_gold(gold_text), _parse_boxed(predicted)) or _same_normalised(gold_text, predicted)


# ---------------------------------------------------------------- extraction

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


# ---------------------------------------------------------------- equivalence


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
        return parse("\\boxed{" + content + "}", extraction_config=config, parsing_timeout=_timeout_s())
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


# ---------------------------------------------------------------- string fallback

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
