"""Tests for the GSM8K and MATH-500 loaders: real files, the shipped copy, data identity, limits, and every
error path.

The missing-data tests run offline and must fail at once with one readable message, never a hub traceback or
a network wait. The reference files are read from RLBENCH_DATA_DIR (tests skip without it).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from rlbench.harness.errors import RLBenchError
from rlbench.workloads import dataset_registry, datasets
from rlbench.workloads.datasets import Problem, data_dir, dataset_names, load_problems, load_split


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
    assert dataset_names() == dataset_registry.names()


def test_unknown_dataset_names_valid_ones() -> None:
    with pytest.raises(RLBenchError, match=r"unknown dataset 'mmlu'; valid datasets: gsm8k, gsm8k-format, math"):
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


def test_without_the_variable_the_shipped_copy_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    # The product never looks for a data folder of its own: no RLBENCH_DATA_DIR, the copy it ships.
    monkeypatch.delenv("RLBENCH_DATA_DIR", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert data_dir() is None
    for dataset, split, rows in (("gsm8k", "train", 7473), ("gsm8k", "test", 1319), ("math", "test", 500)):
        loaded = load_split(dataset, split)
        assert (loaded.origin, len(loaded.problems)) == ("embedded", rows)
        assert loaded.location == f"rlbench.workloads/data/{datasets.dataset_registry.get(dataset).local_dir}/" + (
            f"{split}.jsonl.gz"
        )


@pytest.mark.parametrize("dataset, split", [("gsm8k", "train"), ("gsm8k", "test"), ("math", "test")])
def test_shipped_copy_is_the_reference_data(real_dir: Path, monkeypatch: pytest.MonkeyPatch, dataset, split) -> None:
    local = load_split(dataset, split)
    monkeypatch.delenv("RLBENCH_DATA_DIR")
    shipped = load_split(dataset, split)
    assert (local.origin, shipped.origin) == ("local", "embedded")
    assert local.problems == shipped.problems
    assert local.identity()["sha256"] == shipped.identity()["sha256"]


def test_identity_names_origin_and_changes_with_any_problem(offline_empty_dir: Path) -> None:
    rows = [{"question": "1 + 1?", "answer": "#### 2"}, {"question": "2 + 2?", "answer": "#### 4"}]
    _write_jsonl(offline_empty_dir / "gsm8k" / "test.jsonl", rows)
    first = load_split("gsm8k", "test").identity()
    assert first["origin"] == "local" and first["problems"] == 2 and first["revision"] is None
    assert first["location"] == str(offline_empty_dir / "gsm8k" / "test.jsonl")
    assert len(first["sha256"]) == 64
    assert load_split("gsm8k", "test").identity() == first  # deterministic
    assert load_split("gsm8k", "test", limit=1).identity()["sha256"] != first["sha256"]
    rows[1]["answer"] = "#### 5"  # one ground truth changed
    _write_jsonl(offline_empty_dir / "gsm8k" / "test.jsonl", rows)
    assert load_split("gsm8k", "test").identity()["sha256"] != first["sha256"]


def test_explicit_directory_without_the_file_is_one_clear_error(offline_empty_dir: Path) -> None:
    start = time.perf_counter()
    with pytest.raises(RLBenchError) as caught:
        load_problems("math", "test")
    assert time.perf_counter() - start < 1.0  # no network wait, no silent fallback to another copy
    message = str(caught.value)
    assert f"RLBENCH_DATA_DIR={offline_empty_dir} has no math500/test.jsonl" in message
    assert "unset RLBENCH_DATA_DIR to use the copy rlbench ships" in message
    assert "\n" not in message
    assert caught.value.__cause__ is None and caught.value.__context__ is None


@pytest.fixture
def unshipped(monkeypatch: pytest.MonkeyPatch) -> None:
    """A dataset rlbench ships no copy of, with no RLBENCH_DATA_DIR: only the hub is left."""
    monkeypatch.delenv("RLBENCH_DATA_DIR", raising=False)
    monkeypatch.setattr(datasets, "_embedded_file", lambda source, split: None)


def test_missing_data_is_one_clear_error(unshipped: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(RLBenchError) as caught:
        load_problems("math", "test")
    message = str(caught.value)
    assert "rlbench ships no copy of it, RLBENCH_DATA_DIR is not set" in message
    assert "HuggingFaceH4/MATH-500" in message and "HF_HUB_OFFLINE" in message
    assert "Set RLBENCH_DATA_DIR to a folder holding math500/test.jsonl" in message
    assert "\n" not in message
    assert caught.value.__cause__ is None and caught.value.__context__ is None


def test_hub_failure_is_one_clear_error(unshipped: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)

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


def test_hub_load_is_pinned_and_named(unshipped: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    asked = {}

    class Table(list):
        def select(self, indices):
            return Table(self[i] for i in indices)

    def load_dataset(path, config, split, revision):
        asked.update(path=path, config=config, split=split, revision=revision)
        return Table([{"question": "q", "answer": "#### 3"}] * 3)

    monkeypatch.setattr(datasets, "_hub_unresolvable", lambda: None)
    monkeypatch.setitem(sys.modules, "datasets", SimpleNamespace(load_dataset=load_dataset))
    loaded = load_split("gsm8k", "test", limit=2)
    row = datasets.dataset_registry.get("gsm8k")
    assert asked == {"path": "openai/gsm8k", "config": "main", "split": "test", "revision": row.hub_revision}
    identity = loaded.identity()
    assert (identity["origin"], identity["location"], identity["revision"]) == ("hub", "openai/gsm8k", row.hub_revision)
    assert identity["problems"] == 2


def test_unresolvable_hub_fails_fast(unshipped: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # Without HF_HUB_OFFLINE an offline machine is caught by a DNS lookup, not 25 s of
    # huggingface_hub retries.
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)

    def no_dns(*_args: object) -> None:
        raise OSError("Name or service not known")

    monkeypatch.setattr(datasets.socket, "getaddrinfo", no_dns)
    with pytest.raises(RLBenchError, match=r"cannot resolve huggingface\.co"):
        load_problems("gsm8k", "test")


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
