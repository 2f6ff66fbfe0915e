"""Tests for the shared reward module, run against the real GSM8K and MATH-500 files.

Every published gold answer must score 1.0 against itself: a reward that misses a
correct answer would depress one framework's curve for reasons that are not its own.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

import pytest

from rlbench.harness.errors import RLBenchError
from rlbench.workloads import dataset_registry, rewards
from rlbench.workloads.datasets import data_dir
from rlbench.workloads.rewards import gsm8k_ground_truth, reward_names, score


def _rows(relative: str) -> list[dict[str, Any]]:
    root = data_dir()
    path = root / relative if root is not None else Path(relative)
    if not path.is_file():
        pytest.skip(f"reference data not found: {path} (set RLBENCH_DATA_DIR)")
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


@pytest.fixture(scope="module")
def gsm8k_test() -> list[dict[str, Any]]:
    return _rows("gsm8k/test.jsonl")


@pytest.fixture(scope="module")
def math500() -> list[dict[str, Any]]:
    return _rows("math500/test.jsonl")


def _failures(cases: list[tuple[str, str, str]], dataset: str, expected: float) -> list[str]:
    # One test per corpus, listing every miss, reads better than 1,819 parametrized ids.
    return [
        f"{uid}: {response!r} vs {truth!r}"
        for uid, response, truth in cases
        if score(dataset, response, truth) != expected
    ]


# ---------------------------------------------------------------- API


def test_reward_names() -> None:
    assert reward_names() == dataset_registry.names()


def test_unknown_dataset_raises_naming_valid_ones() -> None:
    with pytest.raises(RLBenchError, match=r"'mmlu'.*gsm8k, gsm8k-format, math"):
        score("mmlu", "#### 1", "1")


# ---------------------------------------------------------------- GSM8K


def test_gsm8k_ground_truth_extraction() -> None:
    assert gsm8k_ground_truth("She makes 9 * 2 = $<<9*2=18>>18.\n#### 18") == "18"
    assert gsm8k_ground_truth("#### 1,450,000") == "1450000"
    assert gsm8k_ground_truth("#### -3") == "-3"
    with pytest.raises(RLBenchError):
        gsm8k_ground_truth("no final answer here ####")


def test_every_gsm8k_gold_scores_one(gsm8k_test: list[dict[str, Any]]) -> None:
    cases = []
    for index, row in enumerate(gsm8k_test):
        truth = gsm8k_ground_truth(row["answer"])
        cases.append((f"test/{index}", f"Let me think. So the answer is #### {truth}", truth))
        cases.append((f"test/{index}", row["answer"], truth))  # the full gold solution
    assert _failures(cases, "gsm8k", 1.0) == []


def test_gsm8k_wrong_number_scores_zero(gsm8k_test: list[dict[str, Any]]) -> None:
    cases = []
    for index, row in enumerate(gsm8k_test):
        truth = gsm8k_ground_truth(row["answer"])
        cases.append((f"test/{index}", f"So the answer is #### {int(truth) + 1}", truth))
    assert _failures(cases, "gsm8k", 0.0) == []


@pytest.mark.parametrize(
    "response, truth",
    [
        ("#### 1,000", "1000"),
        ("#### 1000", "1,000"),
        ("#### $18", "18"),
        ("#### 18.0", "18"),
        ("#### 18.", "18"),
        ("#### 18 dollars", "18"),
        ("#### 50%", "50"),
        ("#### -7", "-7"),
        ("#### 0.5", ".5"),
        ("She has 3 apples, then 5 more, so 8 in total.", "8"),  # no ####: last number
        ("#### 12\nchecking: 3 * 4 = 12, and 7 is odd", "12"),  # #### wins over the last number
        ("The answer is $1,234.50.", "1234.5"),
    ],
)
def test_gsm8k_equivalences(response: str, truth: str) -> None:
    assert score("gsm8k", response, truth) == 1.0


@pytest.mark.parametrize(
    "response, truth",
    [
        ("#### 19", "18"),
        ("#### 1,2,3", "123"),  # a list, not a thousands-separated number
        ("#### 18.5", "18"),
        ("#### -18", "18"),
    ],
)
def test_gsm8k_non_equivalences(response: str, truth: str) -> None:
    assert score("gsm8k", response, truth) == 0.0


# ---------------------------------------------------------------- MATH


def test_every_math500_gold_scores_one(math500: list[dict[str, Any]]) -> None:
    cases = [(row["unique_id"], f"Thus the answer is $\\boxed{{{row['answer']}}}$.", row["answer"]) for row in math500]
    assert len(cases) == 500
    assert _failures(cases, "math", 1.0) == []


def test_every_math500_gold_solution_scores_one(math500: list[dict[str, Any]]) -> None:
    # The published solutions box their answer inside full worked text.
    cases = [(row["unique_id"], row["solution"], row["answer"]) for row in math500]
    assert _failures(cases, "math", 1.0) == []


def test_math500_wrong_numeric_answer_scores_zero(math500: list[dict[str, Any]]) -> None:
    numeric = [row for row in math500 if re.fullmatch(r"-?\d+(\.\d+)?", row["answer"].strip())]
    assert len(numeric) > 100  # most MATH-500 answers are plain numbers
    cases = [(row["unique_id"], f"\\boxed{{{float(row['answer']) + 1:g}}}", row["answer"]) for row in numeric]
    assert _failures(cases, "math", 0.0) == []


@pytest.mark.parametrize(
    "response, truth",
    [
        ("\\boxed{\\frac12}", "0.5"),
        ("\\boxed{0.5}", "\\frac{1}{2}"),
        ("\\boxed{\\dfrac{1}{2}}", "\\frac12"),
        ("so \\boxed 5.", "5"),
        ("\\fbox{5}", "5"),
        ("first \\boxed{3}, then corrected: \\boxed{4}", "4"),  # the last box counts
        ("\\boxed{\\{1, 2\\}}", "\\{1,2\\}"),  # escaped braces inside the box
        ("\\boxed{x = 5}", "5"),
        ("\\boxed{90^\\circ}", "90"),
        ("\\boxed{\\text{(C)}}", "\\text{(C)}"),
        ("\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}", "\\left( 3, \\frac{\\pi}{2} \\right)"),
        ("\\boxed{2\\sqrt{2}}", "\\sqrt{8}"),
    ],
)
def test_math_equivalences(response: str, truth: str) -> None:
    assert score("math", response, truth) == 1.0


@pytest.mark.parametrize(
    "response, truth",
    [
        ("\\boxed{4}", "5"),
        ("\\boxed{\\frac{1}{3}}", "0.5"),
        ("\\boxed{(-2,7)}", "[-2,7]"),
        ("\\boxed{\\text{(B)}}", "\\text{(C)}"),
    ],
)
def test_math_non_equivalences(response: str, truth: str) -> None:
    assert score("math", response, truth) == 0.0


def test_math_string_fallback_when_unparseable() -> None:
    # A long answer skips math-verify; identical typesetting modulo spacing still matches.
    long_answer = " + ".join(f"x_{{{i}}}" for i in range(120))
    assert score("math", f"\\boxed{{{long_answer}}}", long_answer.replace(" ", "")) == 1.0


def test_math_scores_in_a_worker_thread() -> None:
    # math-verify's signal-based timeout would raise ValueError outside the main thread.
    results: list[float] = []
    worker = threading.Thread(
        target=lambda: results.extend(
            [
                score("math", "\\boxed{\\dfrac{1}{2}}", "0.5"),
                score("math", "\\boxed{3}", "\\frac{7}{2}"),
            ]
        )
    )
    worker.start()
    worker.join(timeout=60)
    assert results == [1.0, 0.0]


def test_last_boxed_extraction() -> None:
    assert rewards.last_boxed("a \\boxed{\\frac{1}{2}} b") == "\\frac{1}{2}"
    assert rewards.last_boxed("\\boxed{1} and \\fbox{2}") == "2"
    assert rewards.last_boxed("\\boxed 7$") == "7"
    assert rewards.last_boxed("\\boxed{2} then \\boxed{unclosed") == "2"
    assert rewards.last_boxed("\\boxedfoo{1}") is None
    assert rewards.last_boxed("no box") is None


# ---------------------------------------------------------------- no answer, odd text


@pytest.mark.parametrize(
    "dataset, response, truth",
    [
        ("gsm8k", "", "18"),
        ("gsm8k", "   \n", "18"),
        ("gsm8k", "I do not know.", "18"),
        ("gsm8k", "#### ", "18"),
        ("math", "", "5"),
        ("math", "The answer is 5.", "5"),  # MATH needs a boxed answer
        ("math", "\\boxed{}", "5"),
        ("math", "\\boxed{5", "5"),
        ("math", "\\boxed", "5"),
    ],
)
def test_no_answer_scores_zero(dataset: str, response: str, truth: str) -> None:
    assert score(dataset, response, truth) == 0.0


@pytest.mark.parametrize(
    "response",
    [
        "\x00\ud800\\boxed{\ud800}",
        "\\boxed{\\sqrt{}}",
        "\\boxed{" + "(" * 300 + "}",
        "\\boxed{" + "1" * 5000 + "}",
        "#### " + "9" * 400,
        "}}}}{{{{\\boxed{{}}}}",
        None,
    ],
)
def test_odd_text_never_raises(response: Any) -> None:
    for dataset in reward_names():
        assert score(dataset, response, "5") in (0.0, 1.0)
