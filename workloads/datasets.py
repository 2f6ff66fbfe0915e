"""Problem loader for the datasets in `rlbench.workloads.dataset_registry` (GSM8K, MATH-500).

Every framework adapter gets its prompts and ground truths from `load_split`, so all
frameworks train and score on the same rows in the same order. The registry row names
the files, the hub id and revision and the row parser; this module only finds and reads.

Lookup order:

1. `RLBENCH_DATA_DIR`, when set: `<row.local_dir>/<split>.jsonl` in the publishers'
   file layout, e.g. `gsm8k/train.jsonl`, `math500/test.jsonl`. An explicit folder
   without the file is an error, never silently replaced by another copy;
2. the copy rlbench ships (`rlbench/workloads/data/<row.local_dir>/<split>.jsonl.gz`,
   the publishers' files, gzipped), so the embedded default runs offline;
3. the Hugging Face hub (`row.hub_path` at the pinned `row.hub_revision`), skipped when
   `HF_HUB_OFFLINE` or `HF_DATASETS_OFFLINE` is set;
4. otherwise one `RLBenchError` saying where it looked and how to fix it.

Each load says where its problems came from and hashes them (`ProblemSet.identity`):
two runs with the same hash trained on the same problems, whichever copy they read.

    load_problems("gsm8k", "test", limit=8)
    load_split("gsm8k", "train").identity()["sha256"]
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import socket
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlparse

from rlbench.harness.errors import RLBenchError
from rlbench.workloads import dataset_registry
from rlbench.workloads.dataset_registry import Dataset, Row

DATA_DIR_ENV = "RLBENCH_DATA_DIR"

# The copies rlbench ships, under the `rlbench.workloads` package.
EMBEDDED_DIR = "data"

# Seconds huggingface_hub waits on the network; its defaults (10 s metadata, 10 s per
# read) are long enough to look like a hang when a machine is offline.
_HUB_TIMEOUT_S = "5"


@dataclass(frozen=True)
class Problem:
    """One prompt with its reference answer, as the reward module expects it."""

    uid: str  # stable across runs and frameworks, so per-problem results can be joined
    question: str
    ground_truth: str  # GSM8K: the number after `####`; MATH: LaTeX without `\boxed`
    dataset: str  # the registry name


@dataclass(frozen=True)
class ProblemSet:
    """The problems of one split as loaded, and where they came from."""

    dataset: str
    split: str
    problems: list[Problem]
    origin: str  # "local" (RLBENCH_DATA_DIR), "embedded" (the copy rlbench ships) or "hub"
    location: str  # the file, or the hub dataset id
    revision: str | None = None  # the hub revision; None for files

    def sha256(self) -> str:
        """A digest of the problems themselves (uid, question, ground truth), the same from any copy."""
        digest = hashlib.sha256()
        for problem in self.problems:
            digest.update(json.dumps([problem.uid, problem.question, problem.ground_truth]).encode() + b"\n")
        return digest.hexdigest()

    def identity(self) -> dict[str, Any]:
        """What run.json's `data` records: enough to tell whether two runs used the same problems."""
        return {
            "dataset": self.dataset,
            "split": self.split,
            "origin": self.origin,
            "location": self.location,
            "revision": self.revision,
            "problems": len(self.problems),
            "sha256": self.sha256(),
        }


def dataset_names() -> tuple[str, ...]:
    """The dataset names `load_problems` accepts: those of the registry."""
    return dataset_registry.names()


def data_dir() -> Path | None:
    """The folder named by `RLBENCH_DATA_DIR`, or None when it is not set.

    It wins whenever it is set, even if it does not exist, because an explicit choice
    must not be silently replaced by another copy.
    """
    explicit = os.environ.get(DATA_DIR_ENV, "").strip()
    return Path(explicit).expanduser() if explicit else None


def load_problems(dataset: str, split: str, limit: int | None = None) -> list[Problem]:
    """The first `limit` problems (all when None) of `dataset`'s `split`, in file order."""
    return load_split(dataset, split, limit).problems


def load_split(dataset: str, split: str, limit: int | None = None) -> ProblemSet:
    """`load_problems` with the problems' origin: the first of RLBENCH_DATA_DIR, the shipped copy, the hub."""
    source = _source(dataset, split)
    _check_limit(limit)
    root = data_dir()
    if root is not None:
        path = root / _relative_file(source, split)
        if not path.is_file():
            raise RLBenchError(
                f"{DATA_DIR_ENV}={root} has no {_relative_file(source, split)} (dataset {source.name!r} split "
                f"{split!r}); add the file in the publisher's layout, or unset {DATA_DIR_ENV} to use "
                f"{_fallback(source, split)}"
            )
        return _file_problems(source, split, "local", str(path), lambda: path.open("rb"), limit)
    shipped = _embedded_file(source, split)
    if shipped is not None:
        location = f"rlbench.workloads/{EMBEDDED_DIR}/{_relative_file(source, split)}.gz"
        return _file_problems(source, split, "embedded", location, lambda: _open_gzip(shipped), limit)
    return _hub_problems(source, split, limit)


def _source(dataset: str, split: str) -> Dataset:
    source = dataset_registry.get(dataset)
    if split not in source.splits:
        raise RLBenchError(source.unknown_split(split))
    return source


def _check_limit(limit: int | None) -> None:
    if limit is None:
        return
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise RLBenchError(f"limit must be None or an integer >= 0, got {limit!r}")


def _relative_file(source: Dataset, split: str) -> Path:
    return Path(source.local_dir) / f"{split}.jsonl"


def _embedded_file(source: Dataset, split: str):
    """The shipped copy of this split (a package resource), or None where rlbench ships none."""
    shipped = resources.files("rlbench.workloads").joinpath(EMBEDDED_DIR, source.local_dir, f"{split}.jsonl.gz")
    return shipped if shipped.is_file() else None


def _open_gzip(resource) -> IO[bytes]:
    return gzip.GzipFile(fileobj=resource.open("rb"), mode="rb")


def _fallback(source: Dataset, split: str) -> str:
    if _embedded_file(source, split) is not None:
        return "the copy rlbench ships"
    return f"the hub ({source.hub_path})"


# ---------------------------------------------------------------- local files


def _file_problems(
    source: Dataset, split: str, origin: str, location: str, opener: Callable[[], IO[bytes]], limit: int | None
) -> ProblemSet:
    with opener() as handle:
        rows = list(_read_jsonl(handle, location, limit))
    problems = [_to_problem(source, Row(row, split, index, location)) for index, row in enumerate(rows)]
    if not problems and limit != 0:
        # Caught here, before a tiny model is trained (and cached) on an empty corpus.
        raise RLBenchError(
            f"{location} is empty (no JSON lines): dataset {source.name!r} split {split!r} has no problems; "
            f"restore the file, or point {DATA_DIR_ENV} at a complete copy"
        )
    return ProblemSet(source.name, split, problems, origin, location)


def _read_jsonl(handle: IO[bytes], location: str, limit: int | None) -> Iterator[dict[str, Any]]:
    # Reads lazily so a small `limit` never parses the whole 4 MB train file.
    count = 0
    for number, raw in enumerate(handle, start=1):  # bytes, decoded per line, so a bad byte is named with its line
        if limit is not None and count >= limit:
            return
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RLBenchError(
                f"{location}:{number}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at column "
                f"{exc.start + 1}); restore the file or re-save it as UTF-8"
            ) from None
        if not line.strip():
            continue
        yield _parse_line(location, number, line)
        count += 1


def _parse_line(location: str, number: int, line: str) -> dict[str, Any]:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise RLBenchError(f"{location}:{number}: not valid JSON ({exc.msg})") from None
    if not isinstance(row, dict):
        raise RLBenchError(f"{location}:{number}: expected a JSON object, got {type(row).__name__}")
    return row


# ---------------------------------------------------------------- row conversion


def _to_problem(source: Dataset, row: Row) -> Problem:
    parsed = source.parse(row)
    return Problem(
        uid=f"{source.name}/{parsed.key}",
        question=parsed.question,
        ground_truth=parsed.ground_truth,
        dataset=source.name,
    )


# ---------------------------------------------------------------- hub


def _hub_offline() -> bool:
    # Read at call time: huggingface_hub reads these once at import, which is too late
    # for a caller (or a test) that sets them after something imported `datasets`.
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        if os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on"):
            return True
    return False


def hub_unreachable() -> str | None:
    """Why the Hugging Face hub cannot be reached, where that is cheap to know (offline mode set, or the hub's
    host does not resolve); None otherwise. Callers skip the hub then, instead of a minute of retries."""
    if _hub_offline():
        return "offline mode is set (HF_HUB_OFFLINE)"
    return _hub_unresolvable()


def _hub_problems(source: Dataset, split: str, limit: int | None) -> ProblemSet:
    unreachable = hub_unreachable()
    if unreachable:
        raise _missing_data_error(source, split, unreachable)
    try:
        rows = _hub_rows(source, split, limit)
    except Exception as exc:  # noqa: BLE001 - any hub failure means "data not available"
        raise _missing_data_error(source, split, _short_reason(exc)) from None
    origin = f"hub {source.hub_path}@{source.hub_revision}"
    problems = [_to_problem(source, Row(row, split, index, origin)) for index, row in enumerate(rows)]
    return ProblemSet(source.name, split, problems, "hub", source.hub_path, source.hub_revision)


def _hub_unresolvable() -> str | None:
    """Why the hub cannot be reached, when that is cheap to know; else None.

    huggingface_hub retries a failed request five times with backoff (about 25 s) and
    has no setting to shorten that, so an offline machine is caught here by a DNS
    lookup first. Behind a proxy the local resolver may not know the host while the
    proxy does, so the check is skipped there.
    """
    if any(
        os.environ.get(name)
        for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")
    ):
        return None
    host = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname
    if not host:
        return None
    try:
        socket.getaddrinfo(host, 443)
    except OSError as exc:
        return f"cannot resolve {host} (offline?): {exc}"
    return None


def _hub_rows(source: Dataset, split: str, limit: int | None) -> Iterable[dict[str, Any]]:
    # Only effective if huggingface_hub is not imported yet; setdefault keeps user choices.
    os.environ.setdefault("HF_HUB_ETAG_TIMEOUT", _HUB_TIMEOUT_S)
    os.environ.setdefault("HF_HUB_DOWNLOAD_TIMEOUT", _HUB_TIMEOUT_S)
    import datasets  # deferred: importing it costs about a second and most runs read files

    table = datasets.load_dataset(source.hub_path, source.hub_config, split=split, revision=source.hub_revision)
    if limit is not None:
        table = table.select(range(min(limit, len(table))))
    return list(table)


def _short_reason(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else 'no message'}"[:300]


def _missing_data_error(source: Dataset, split: str, hub_reason: str) -> RLBenchError:
    relative = _relative_file(source, split)
    return RLBenchError(
        f"no data for dataset {source.name!r} split {split!r}: rlbench ships no copy of it, {DATA_DIR_ENV} is not "
        f"set, and the hub {source.hub_path}: {hub_reason}. Set {DATA_DIR_ENV} to a folder holding {relative}."
    )
