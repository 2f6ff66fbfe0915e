"""Tests for the GSM8K and MATH-500 loaders: real files, limits, and every error path.

The missing-data test runs offline against an empty folder and must fail at once
with one readable message, never a hub traceback or a network wait.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from rlbench.errors import RLBenchError
from rlbench.workloads import datasets
from rlbench.workloads.datasets import Problem, data_dir, dataset_names, load_problems


@pytest.fixture(scope="module")
def real_dir() -> Path:
    root = data_dir()
    if root is None or not (root / "gsm8k" / "test.jsonl").is_file():
        pytest.skip(f"reference data not found (data_dir() = {root}); set RLBENCH_DATA_DIR")
    return root


@pytest.fixture
def offline_empty_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RLBENCH_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return tmp_path


def _write_jsonl(path: Path, rows: list[object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


# ---------------------------------------------------------------- real files


@pytest.mark.parametrize(
    "dataset, split, rows",
    [
        ("gsm8k", "train", 7473),
        ("gsm8k", "test", 1319),
        ("math", "test", 500),
    ],
)
def test_real_files_load_completely(real_dir: Path, dataset: str, split: str, rows: int) -> None:
    problems = load_problems(dataset, split)
    assert len(problems) == rows
    assert len({p.uid for p in problems}) == rows  # uids are unique within a split
    for problem in problems:
        assert isinstance(problem, Problem)
        assert problem.dataset == dataset
        assert problem.uid and problem.question.strip() and problem.ground_truth.strip()


def test_first_rows_ground_truth(real_dir: Path) -> None:
    assert load_problems("gsm8k", "train", limit=1)[0].ground_truth == "72"
    test_first = load_problems("gsm8k", "test", limit=1)[0]
    assert test_first.ground_truth == "18"
    assert test_first.question.startswith("Janet")
    assert test_first.uid == "gsm8k/test/0"
    math_first = load_problems("math", "test", limit=1)[0]
    assert math_first.uid == "math/test/precalculus/807.json"
    assert math_first.ground_truth == "\\left( 3, \\frac{\\pi}{2} \\right)"


def test_gsm8k_ground_truth_drops_thousands_separators(real_dir: Path) -> None:
    truths = [p.ground_truth for p in load_problems("gsm8k", "test")]
    assert all("," not in t for t in truths)
    assert "1450000" in truths  # published as "#### 1,450,000"


def test_limit_takes_the_first_rows(real_dir: Path) -> None:
    first = load_problems("gsm8k", "test", limit=5)
    assert first == load_problems("gsm8k", "test")[:5]
    assert load_problems("math", "test", limit=0) == []
    assert len(load_problems("math", "test", limit=10_000)) == 500


def test_problems_are_frozen(real_dir: Path) -> None:
    problem = load_problems("gsm8k", "test", limit=1)[0]
    with pytest.raises(AttributeError):
        problem.question = "changed"  # type: ignore[misc]


def test_real_files_load_fast(real_dir: Path) -> None:
    start = time.perf_counter()
    load_problems("gsm8k", "train")
    load_problems("math", "test")
    assert time.perf_counter() - start < 5.0


# ---------------------------------------------------------------- choices


def test_dataset_names() -> None:
    assert dataset_names() == ("gsm8k", "math")


def test_unknown_dataset_names_valid_ones() -> None:
    with pytest.raises(RLBenchError, match=r"unknown dataset 'mmlu'; valid datasets: gsm8k, math"):
        load_problems("mmlu", "test")


def test_unknown_split_names_valid_ones() -> None:
    with pytest.raises(RLBenchError, match=r"no split 'train'; valid splits: test$"):
        load_problems("math", "train")
    with pytest.raises(RLBenchError, match=r"valid splits: train, test"):
        load_problems("gsm8k", "validation")


@pytest.mark.parametrize("limit", [-1, 1.5, True, "3"])
def test_bad_limit(limit: object) -> None:
    with pytest.raises(RLBenchError, match="limit"):
        load_problems("gsm8k", "test", limit=limit)  # type: ignore[arg-type]


# ---------------------------------------------------------------- data directory


def test_env_var_chooses_the_directory(offline_empty_dir: Path) -> None:
    assert data_dir() == offline_empty_dir


def test_custom_directory_is_read(offline_empty_dir: Path) -> None:
    _write_jsonl(
        offline_empty_dir / "gsm8k" / "test.jsonl",
        [
            {"question": "1 + 1?", "answer": "1 + 1 = 2\n#### 2"},
            {"question": "Ten hundreds?", "answer": "#### 1,000"},
        ],
    )
    problems = load_problems("gsm8k", "test")
    assert [p.ground_truth for p in problems] == ["2", "1000"]
    assert [p.uid for p in problems] == ["gsm8k/test/0", "gsm8k/test/1"]


def test_default_directory_is_beside_the_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RLBENCH_DATA_DIR", raising=False)
    checkout = Path(datasets.__file__).resolve().parents[1]
    expected = checkout.parent / "shared" / "data"
    assert expected in datasets._default_candidates()
    if expected.is_dir() and not (Path.cwd().parent / "shared" / "data").is_dir():
        assert data_dir() == expected


def test_missing_data_is_one_clear_error(offline_empty_dir: Path) -> None:
    start = time.perf_counter()
    with pytest.raises(RLBenchError) as caught:
        load_problems("math", "test")
    assert time.perf_counter() - start < 1.0  # offline: no network wait
    message = str(caught.value)
    assert "RLBENCH_DATA_DIR" in message
    assert str(offline_empty_dir / "math500" / "test.jsonl") in message
    assert "HuggingFaceH4/MATH-500" in message
    assert "\n" not in message
    assert "HF_HUB_OFFLINE" in message
    assert caught.value.__cause__ is None and caught.value.__context__ is None


def test_hub_failure_is_one_clear_error(offline_empty_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE")

    def unreachable(*_args: object) -> None:
        raise ConnectionError("Couldn't reach 'openai/gsm8k' on the Hub\n(long detail)")

    monkeypatch.setattr(datasets, "_hub_unresolvable", lambda: None)
    monkeypatch.setattr(datasets, "_hub_rows", unreachable)
    with pytest.raises(RLBenchError) as caught:
        load_problems("gsm8k", "train")
    message = str(caught.value)
    assert "RLBENCH_DATA_DIR" in message and "gsm8k/train.jsonl" in message
    assert "ConnectionError: Couldn't reach 'openai/gsm8k' on the Hub." in message
    assert "\n" not in message
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_unresolvable_hub_fails_fast(offline_empty_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Without HF_HUB_OFFLINE an offline machine is caught by a DNS lookup, not 25 s of
    # huggingface_hub retries.
    monkeypatch.delenv("HF_HUB_OFFLINE")
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)

    def no_dns(*_args: object) -> None:
        raise OSError("Name or service not known")

    monkeypatch.setattr(datasets.socket, "getaddrinfo", no_dns)
    with pytest.raises(RLBenchError, match=r"cannot resolve huggingface\.co"):
        load_problems("gsm8k", "test")


def test_no_directory_lists_the_default_places(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("RLBENCH_DATA_DIR", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    places = (tmp_path / "a" / "shared" / "data", tmp_path / "b" / "shared" / "data")
    monkeypatch.setattr(datasets, "_default_candidates", lambda: places)
    assert data_dir() is None
    with pytest.raises(RLBenchError) as caught:
        load_problems("gsm8k", "test")
    message = str(caught.value)
    for place in places:
        assert str(place / "gsm8k" / "test.jsonl") in message
    assert "RLBENCH_DATA_DIR is not set" in message


def test_malformed_line_names_file_and_line(offline_empty_dir: Path) -> None:
    path = offline_empty_dir / "gsm8k" / "train.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text('{"question": "q", "answer": "#### 1"}\n{not json\n', encoding="utf-8")
    with pytest.raises(RLBenchError, match=r"train\.jsonl:2: not valid JSON"):
        load_problems("gsm8k", "train")


def test_missing_field_is_reported(offline_empty_dir: Path) -> None:
    _write_jsonl(offline_empty_dir / "math500" / "test.jsonl", [{"problem": "p", "answer": ""}])
    with pytest.raises(RLBenchError, match=r"row 0 has no text field 'answer'"):
        load_problems("math", "test")


def test_gsm8k_answer_without_number_is_reported(offline_empty_dir: Path) -> None:
    _write_jsonl(offline_empty_dir / "gsm8k" / "test.jsonl", [{"question": "q", "answer": "####"}])
    with pytest.raises(RLBenchError, match=r"row 0: GSM8K answer has no number"):
        load_problems("gsm8k", "test")
