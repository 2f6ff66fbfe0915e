"""Problem loader for the datasets in `rlbench.workloads.dataset_registry` (GSM8K, MATH-500).

Every framework adapter gets its prompts and ground truths from `load_problems`, so
all frameworks train and score on the same rows in the same order. The registry row
names the files, the hub id and the row parser; this module only finds and reads.

Lookup order:

1. a local data directory, in the publishers' file layout (see `data_dir`):
   `<row.local_dir>/<split>.jsonl`, e.g. `gsm8k/train.jsonl`, `math500/test.jsonl`;
2. the Hugging Face hub (`row.hub_path`, e.g. `openai/gsm8k` config `main`),
   skipped when `HF_HUB_OFFLINE` or `HF_DATASETS_OFFLINE` is set;
3. otherwise one `RLBenchError` saying where files were looked for and how to fix it.

    problems = load_problems("gsm8k", "test", limit=8)
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from rlbench.errors import RLBenchError
from rlbench.workloads import dataset_registry
from rlbench.workloads.dataset_registry import Dataset, Row

DATA_DIR_ENV = "RLBENCH_DATA_DIR"

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


def dataset_names() -> tuple[str, ...]:
    """The dataset names `load_problems` accepts: those of the registry."""
    return dataset_registry.names()


def data_dir() -> Path | None:
    """The local data directory in use, or None when there is none.

    `RLBENCH_DATA_DIR` wins whenever it is set, even if it does not exist, because an
    explicit choice must not be silently replaced by another copy. Otherwise the first
    existing `../shared/data`, relative to the working directory and then to the
    project checkout.
    """
    explicit = os.environ.get(DATA_DIR_ENV, "").strip()
    if explicit:
        return Path(explicit).expanduser()
    for candidate in _default_candidates():
        if candidate.is_dir():
            return candidate
    return None


def _default_candidates() -> tuple[Path, ...]:
    # parents[1] is the checkout (the folder holding harness/ and workloads/).
    checkout = Path(__file__).resolve().parents[1]
    return (Path.cwd().parent / "shared" / "data", checkout.parent / "shared" / "data")


def load_problems(dataset: str, split: str, limit: int | None = None) -> list[Problem]:
    """The first `limit` problems (all when None) of `dataset`'s `split`, in file order."""
    source = _source(dataset, split)
    _check_limit(limit)
    local = _local_file(source, split)
    if local is not None:
        return _local_problems(source, split, local, limit)
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


def _local_file(source: Dataset, split: str) -> Path | None:
    root = data_dir()
    if root is None:
        return None
    path = root / _relative_file(source, split)
    return path if path.is_file() else None


# ---------------------------------------------------------------- local files


def _local_problems(source: Dataset, split: str, path: Path, limit: int | None) -> list[Problem]:
    rows = _read_jsonl(path, limit)
    problems = [_to_problem(source, Row(row, split, index, str(path))) for index, row in enumerate(rows)]
    if not problems and limit != 0:
        # Caught here, before a tiny model is trained (and cached) on an empty corpus.
        raise RLBenchError(
            f"{path} is empty (no JSON lines): dataset {source.name!r} split {split!r} has no problems; "
            f"restore the file, or point {DATA_DIR_ENV} at a complete copy"
        )
    return problems


def _read_jsonl(path: Path, limit: int | None) -> Iterator[dict[str, Any]]:
    # Reads lazily so a small `limit` never parses the whole 4 MB train file.
    count = 0
    with path.open("rb") as handle:  # bytes, decoded per line, so a bad byte is named with its line
        for number, raw in enumerate(handle, start=1):
            if limit is not None and count >= limit:
                return
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise RLBenchError(
                    f"{path}:{number}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at column "
                    f"{exc.start + 1}); restore the file or re-save it as UTF-8"
                ) from None
            if not line.strip():
                continue
            yield _parse_line(path, number, line)
            count += 1


def _parse_line(path: Path, number: int, line: str) -> dict[str, Any]:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise RLBenchError(f"{path}:{number}: not valid JSON ({exc.msg})") from None
    if not isinstance(row, dict):
        raise RLBenchError(f"{path}:{number}: expected a JSON object, got {type(row).__name__}")
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


def _hub_problems(source: Dataset, split: str, limit: int | None) -> list[Problem]:
    if _hub_offline():
        raise _missing_data_error(source, split, "skipped (HF_HUB_OFFLINE is set)")
    unreachable = _hub_unresolvable()
    if unreachable:
        raise _missing_data_error(source, split, unreachable)
    try:
        rows = _hub_rows(source, split, limit)
    except Exception as exc:  # noqa: BLE001 - any hub failure means "data not available"
        raise _missing_data_error(source, split, _short_reason(exc)) from None
    origin = f"hub {source.hub_path}"
    return [_to_problem(source, Row(row, split, index, origin)) for index, row in enumerate(rows)]


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

    table = datasets.load_dataset(source.hub_path, source.hub_config, split=split)
    if limit is not None:
        table = table.select(range(min(limit, len(table))))
    return list(table)


def _short_reason(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else 'no message'}"[:300]


def _missing_data_error(source: Dataset, split: str, hub_reason: str) -> RLBenchError:
    relative = _relative_file(source, split)
    root = data_dir()
    if root is not None:
        looked = f"{root / relative} (not found)"
    else:
        tried = ", ".join(str(c / relative) for c in _default_candidates())
        looked = f"{tried} (none found; {DATA_DIR_ENV} is not set)"
    target = root if root is not None else _default_candidates()[-1]
    return RLBenchError(
        f"no data for dataset {source.name!r} split {split!r}: looked for {looked}; "
        f"hub {source.hub_path}: {hub_reason}. "
        f"Set {DATA_DIR_ENV} to a folder holding {relative}, or put the file at {target / relative}."
    )
