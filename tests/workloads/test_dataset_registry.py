"""The dataset registry is the one list of datasets: every row is complete, every
consumer (loader, workload check, reward, CLI) derives from it, an unknown name is
refused in one line, and a new row is all a new dataset needs.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from rlbench.harness.cli import main
from rlbench.harness.errors import RLBenchError
from rlbench.workloads import dataset_registry, datasets
from rlbench.workloads.answers import numeric
from rlbench.workloads.catalog import WORKLOAD_DIR, load_workload
from rlbench.workloads.dataset_registry import DATASETS, Dataset, Parsed, Row
from rlbench.workloads.datasets import Problem, data_dir, dataset_names, load_problems
from rlbench.workloads.prompts import render
from rlbench.workloads.rewards import reward_names, score
from tests.conftest import run_cli


def _workload_file(folder: Path, name: str, data: dict[str, object], reward: str) -> Path:
    """A workload file: the shipped gsm8k-grpo-tiny with its data section and reward replaced."""
    path = folder / f"{name}.yaml"
    path.write_text(
        yaml.safe_dump(
            {"include": str(WORKLOAD_DIR / "gsm8k-grpo-tiny.yaml"), "name": name, "data": data, "reward": reward}
        )
    )
    return path


# ---------------------------------------------------------------- completeness


@pytest.mark.parametrize("name", list(DATASETS))
def test_every_row_is_complete(name: str) -> None:
    row = DATASETS[name]
    assert row.name == name
    assert row.local_dir and row.hub_path and row.splits
    assert callable(row.parse) and callable(row.extract) and callable(row.matches)


@pytest.mark.parametrize("name, split", [(n, s) for n, row in DATASETS.items() for s in row.splits])
def test_every_split_parses_and_its_gold_answers_score_one(name: str, split: str) -> None:
    # The parser's ground truth must be in the form the row's scorer reads: a gold
    # answer fed back as the extracted answer is correct, on real rows of every split.
    root = data_dir()
    if root is None and datasets._embedded_file(DATASETS[name], split) is None:
        pytest.skip(f"rlbench ships no copy of {name}/{split}; set RLBENCH_DATA_DIR to test it")
    if root is not None and not (root / DATASETS[name].local_dir / f"{split}.jsonl").is_file():
        pytest.skip(f"reference data for {name}/{split} not found (data_dir() = {root})")
    problems = load_problems(name, split, limit=50)
    assert len(problems) == 50 and all(p.dataset == name and p.uid.startswith(f"{name}/") for p in problems)
    row = DATASETS[name]
    assert [p.uid for p in problems if not row.matches(p.ground_truth, p.ground_truth)] == []


def test_every_consumer_lists_the_registry() -> None:
    assert dataset_names() == reward_names() == dataset_registry.names() == tuple(DATASETS)


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("parse", None, "parse must be callable"),
        ("matches", "numeric.matches", "matches must be callable"),
        ("splits", (), "splits must name at least one split"),
        ("hub_path", "", "hub_path must be a non-empty string"),
    ],
)
def test_an_incomplete_row_is_refused(field: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(DATASETS["gsm8k"], **{field: value})


# ---------------------------------------------------------------- unknown names


def test_unknown_dataset_is_one_line_naming_the_known_ones() -> None:
    with pytest.raises(RLBenchError) as caught:
        dataset_registry.get("gsm9k")
    assert (
        str(caught.value) == "unknown dataset 'gsm9k'; did you mean 'gsm8k'? valid datasets: gsm8k, gsm8k-format, math"
    )
    # The loader and the reward refuse it the same way instead of guessing a parser or scorer.
    for call in (lambda: load_problems("gsm9k", "test"), lambda: score("gsm9k", "#### 1", "1")):
        with pytest.raises(RLBenchError, match=r"^unknown dataset 'gsm9k'; did you mean 'gsm8k'\? valid datasets"):
            call()


@pytest.mark.parametrize(
    "data, reward, message",
    [
        (
            {"dataset": "mmlu", "split": "test"},
            "mmlu",
            "data.dataset: unknown dataset 'mmlu'; valid datasets: gsm8k, gsm8k-format, math",
        ),
        (
            {"dataset": "gsm8", "split": "test"},
            "gsm8k",
            "data.dataset: unknown dataset 'gsm8'; did you mean 'gsm8k'? valid datasets: gsm8k, gsm8k-format, math",
        ),
        (
            {"dataset": "math", "split": "train"},
            "math",
            "data.split: dataset 'math' has no split 'train'; valid splits: test",
        ),
    ],
)
def test_validate_refuses_an_unknown_dataset_in_one_line(
    tmp_path: Path, data: dict[str, object], reward: str, message: str
) -> None:
    path = _workload_file(tmp_path, "custom", data, reward)
    result = run_cli("validate", str(path))
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [f"error: workload file {path}: {message}"]
    assert "Traceback" not in result.stdout + result.stderr


# ---------------------------------------------------------------- a new row is all it takes


def _toy_problem(row: Row) -> Parsed:
    return Parsed(key=row.text("id"), question=row.text("q"), ground_truth=row.text("a"))


TOY = Dataset(
    name="toy",
    local_dir="toy-arith",
    splits=("dev",),
    hub_path="example/toy-arith",
    hub_config=None,
    hub_revision="0" * 40,
    parse=_toy_problem,
    extract=numeric.extract,
    matches=numeric.matches,
)


@pytest.fixture
def toy_registered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The TOY row registered and its file in a data directory of its own, offline."""
    monkeypatch.setitem(DATASETS, TOY.name, TOY)
    monkeypatch.setenv("RLBENCH_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    (tmp_path / "toy-arith").mkdir()
    (tmp_path / "toy-arith" / "dev.jsonl").write_text(
        json.dumps({"id": "a1", "q": "What is 2 + 2?", "a": "4"})
        + "\n"
        + json.dumps({"id": "a2", "q": "What is 6 * 7?", "a": "42"})
        + "\n",
        encoding="utf-8",
    )
    return tmp_path


def test_a_new_row_loads_scores_and_validates(toy_registered: Path) -> None:
    problems = load_problems("toy", "dev")
    assert problems == [
        Problem(uid="toy/a1", question="What is 2 + 2?", ground_truth="4", dataset="toy"),
        Problem(uid="toy/a2", question="What is 6 * 7?", ground_truth="42", dataset="toy"),
    ]
    assert score("toy", "2 and 2 make 4.", "4") == 1.0
    assert score("toy", "#### 41", "42") == 0.0
    assert "toy" in dataset_names() and "toy" in reward_names()

    path = _workload_file(toy_registered, "toy-grpo", {"dataset": "toy", "split": "dev"}, "toy")
    workload = load_workload(str(path))
    assert render(workload, problems[1]).dataset == "toy"
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"ok: toy-grpo v1: grpo on toy/dev (2 problems, local: {toy_registered}")


def test_a_new_row_names_its_own_files_when_data_is_missing(toy_registered: Path) -> None:
    (toy_registered / "toy-arith" / "dev.jsonl").unlink()
    with pytest.raises(RLBenchError) as caught:
        load_problems("toy", "dev")
    message = str(caught.value)
    assert f"RLBENCH_DATA_DIR={toy_registered} has no toy-arith/dev.jsonl" in message
    assert "unset RLBENCH_DATA_DIR to use the hub (example/toy-arith)" in message
    with pytest.raises(RLBenchError, match=r"no split 'test'; valid splits: dev$"):
        load_problems("toy", "test")


def test_a_new_rows_bad_rows_are_named(toy_registered: Path) -> None:
    (toy_registered / "toy-arith" / "dev.jsonl").write_text(json.dumps({"id": "a1", "q": "2 + 2?"}) + "\n")
    with pytest.raises(RLBenchError, match=r"dev\.jsonl: row 0 has no text field 'a'$"):
        load_problems("toy", "dev")
