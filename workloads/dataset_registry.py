"""The dataset registry: one row per dataset, the only place that lists datasets.

A row says where the dataset lives (a folder of `<split>.jsonl` files in the
publisher's layout, also the name of rlbench's shipped copy, and its Hugging Face hub
id and pinned revision), how one raw row becomes a problem,
and how a response's final answer is extracted and checked. The loader
(`datasets.load_problems`), workload validation (`spec.DataSpec`) and the reward
(`rewards.score`) all look names up here at call time, so adding a dataset is adding
a row; workloads/README.md ("Add a dataset") has the checklist.

    get("gsm8k").hub_path   # 'openai/gsm8k'
    get("gsm9k")            # RLBenchError: unknown dataset 'gsm9k'; did you mean 'gsm8k'? ...
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from rlbench.harness.errors import RLBenchError
from rlbench.workloads.answers import boxed, digit, numeric


@dataclass(frozen=True, slots=True)
class Row:
    """One raw record of a dataset file or hub table, with its place for error messages."""

    values: Mapping[str, Any]
    split: str
    index: int  # position in the split, from 0
    origin: str  # the file path, or "hub <id>"

    def text(self, name: str) -> str:
        """The non-blank text field `name`; its absence is an error naming file and row."""
        value = self.values.get(name)
        if not isinstance(value, str) or not value.strip():
            raise RLBenchError(f"{self.origin}: row {self.index} has no text field {name!r}")
        return value

    def error(self, why: str) -> RLBenchError:
        return RLBenchError(f"{self.origin}: row {self.index}: {why}")


class Parsed(NamedTuple):
    """What a parser reads from one row; the loader adds the dataset name."""

    key: str  # unique within the dataset and stable across runs; the problem's uid is "<dataset>/<key>"
    question: str
    ground_truth: str  # in the form the row's `matches` expects


@dataclass(frozen=True, kw_only=True, slots=True)
class Dataset:
    """One registry row: source, problem parser and scorer of a dataset."""

    name: str  # as written in workload files (`data.dataset`, `reward`)
    local_dir: str  # folder under the data directory holding `<split>.jsonl`
    splits: tuple[str, ...]
    hub_path: str  # Hugging Face hub dataset id, read when neither RLBENCH_DATA_DIR nor rlbench's copy has the split
    hub_config: str | None
    hub_revision: str  # the hub dataset's commit: a load from the hub reads these problems and no later edit
    parse: Callable[[Row], Parsed]
    extract: Callable[[str], str | None]  # the final answer of a non-blank response, or None
    matches: Callable[[str, str], bool]  # (extracted answer, ground truth) -> correct?

    def __post_init__(self) -> None:
        for field in ("name", "local_dir", "hub_path", "hub_revision"):
            if not isinstance(getattr(self, field), str) or not getattr(self, field):
                raise ValueError(f"dataset row: {field} must be a non-empty string, got {getattr(self, field)!r}")
        if not self.splits or not all(isinstance(s, str) and s for s in self.splits):
            raise ValueError(f"dataset {self.name!r}: splits must name at least one split, got {self.splits!r}")
        for field in ("parse", "extract", "matches"):
            if not callable(getattr(self, field)):
                raise ValueError(f"dataset {self.name!r}: {field} must be callable")

    def unknown_split(self, split: object) -> str:
        """The one-line refusal of a split this dataset does not have."""
        return f"dataset {self.name!r} has no split {split!r}; valid splits: {', '.join(self.splits)}"


# ---------------------------------------------------------------- parsers


def _gsm8k_problem(row: Row) -> Parsed:
    answer = row.text("answer")
    try:
        truth = numeric.reference(answer)
    except RLBenchError as exc:
        raise row.error(str(exc)) from None
    # GSM8K rows carry no id; the split and position are stable in the published files.
    return Parsed(key=f"{row.split}/{row.index}", question=row.text("question"), ground_truth=truth)


# The digit every reply of the format task must start with (gsm8k-format).
FORMAT_DIGIT = "7"


def _format_problem(row: Row) -> Parsed:
    """A format task on GSM8K's rows: a numbered instruction to reply with one fixed digit. Short on purpose:
    the tiny models' tokenizer is trained on the workload's prompts, and GSM8K's wording would fill its
    vocabulary with words, leaving a random model almost no digit to start learning from."""
    problem = _gsm8k_problem(row)  # the same rows, keys and checks as GSM8K
    # numbered 0-99: a numbering up to 7,472 would fill the tokenizer with multi-digit tokens
    question = f"Problem {row.index % 100}: answer with {FORMAT_DIGIT}. Answer:"
    return Parsed(key=problem.key, question=question, ground_truth=FORMAT_DIGIT)


def _math_problem(row: Row) -> Parsed:
    uid = row.values.get("unique_id")
    # unique_id (e.g. "test/precalculus/807.json") is MATH's own id; position is a fallback.
    key = uid if isinstance(uid, str) and uid else f"{row.split}/{row.index}"
    return Parsed(key=key, question=row.text("problem"), ground_truth=row.text("answer").strip())


# ---------------------------------------------------------------- the registry

# Where GSM8K's files are, for GSM8K and the task built on its rows alike.
GSM8K_FILES: dict[str, Any] = {
    "local_dir": "gsm8k",
    "splits": ("train", "test"),
    "hub_path": "openai/gsm8k",
    "hub_config": "main",
    # The revision UKGovernmentBEIS/inspect_evals pins (GSM8K_DATASET_REVISION), main on 2026-03-16.
    "hub_revision": "cc7b047b6e5bb11b4f1af84efc572db110a51b3c",
}

DATASETS: dict[str, Dataset] = {
    row.name: row
    for row in (
        Dataset(
            name="gsm8k",
            **GSM8K_FILES,
            parse=_gsm8k_problem,
            extract=numeric.extract,
            matches=numeric.matches,
        ),
        # The learnable format task on GSM8K's rows (the tiny models cannot learn GSM8K itself): reply with one
        # fixed digit, judged on the reply's first digit.
        Dataset(
            name="gsm8k-format",
            **GSM8K_FILES,
            parse=_format_problem,
            extract=digit.extract,
            matches=digit.matches,
        ),
        # MATH-500 (the PRM800K test subset of Hendrycks' MATH) is only ever published as a test split.
        Dataset(
            name="math",
            local_dir="math500",
            splits=("test",),
            hub_path="HuggingFaceH4/MATH-500",
            hub_config=None,
            # "Update README.md" of 2024-11-15 on the dataset's commit history: its data files since the upload.
            hub_revision="ff5b20257d8185524591543f8ff5993951537bb8",
            parse=_math_problem,
            extract=boxed.extract,
            matches=boxed.matches,
        ),
    )
}


def names() -> tuple[str, ...]:
    """The registered dataset names, in registry order."""
    return tuple(DATASETS)


def unknown_dataset(name: object) -> str:
    """The one-line refusal of a dataset name that is not registered, with the nearest name if any."""
    close = difflib.get_close_matches(name, DATASETS, n=1) if isinstance(name, str) else []
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"unknown dataset {name!r}; {hint}valid datasets: {', '.join(DATASETS)}"


def get(name: str) -> Dataset:
    """The registry row of `name`; an unknown name is an `RLBenchError` listing the known ones."""
    row = DATASETS.get(name) if isinstance(name, str) else None
    if row is None:
        raise RLBenchError(unknown_dataset(name))
    return row
