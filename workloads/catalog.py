"""Find and load workload YAML files into `Workload` dataclasses.

A workload is named by its file stem (`workloads/gsm8k-grpo-tiny.yaml` is
`gsm8k-grpo-tiny`) or given as a path. A file may start with `include:` naming one
file or a list of files, as lm-evaluation-harness task files do: the included
mappings are the base, in order, and the file's own keys override them, nested
mappings merged key by key.

    rlbench validate workloads/gsm8k-grpo-tiny.yaml
"""

from __future__ import annotations

import dataclasses
import difflib
from pathlib import Path
from typing import Any

from rlbench.harness.errors import RLBenchError
from rlbench.harness.yaml_input import read_yaml
from rlbench.workloads.spec import (
    AlgorithmSpec,
    DataSpec,
    ModelSpec,
    PromptSpec,
    SamplingSpec,
    TargetSpec,
    TinyModelSpec,
    Workload,
)

WORKLOAD_DIR = Path(__file__).resolve().parent
_SECTIONS = {
    "data": DataSpec,
    "prompt": PromptSpec,
    "algorithm": AlgorithmSpec,
    "sampling": SamplingSpec,
    "target": TargetSpec,
}


def available_workloads() -> list[str]:
    """Names of the workload files shipped with rlbench (files starting with '_' are bases)."""
    return sorted(p.stem for p in WORKLOAD_DIR.glob("*.yaml") if not p.name.startswith("_"))


def resolve_path(name_or_path: str) -> Path:
    """The YAML file of a workload name or path; a miss suggests the nearest names."""
    as_path = Path(name_or_path)
    if as_path.suffix in (".yaml", ".yml"):
        if not as_path.is_file():
            raise RLBenchError(f"workload file {name_or_path} does not exist")
        return as_path
    candidate = WORKLOAD_DIR / f"{name_or_path}.yaml"
    if candidate.is_file() and not name_or_path.startswith("_"):
        return candidate
    names = available_workloads()
    close = difflib.get_close_matches(name_or_path, names, n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    raise RLBenchError(f"unknown workload '{name_or_path}'; {hint}available: {', '.join(names)}")


def _include_paths(path: Path, include: Any) -> list[Path]:
    """The files an `include:` names (one or a list), relative to the including file, each checked."""
    names = include if isinstance(include, list) else [] if include is None else [include]
    found = []
    for name in names:
        if not isinstance(name, str) or not name.strip():
            raise RLBenchError(f"workload file {path}: include: expected a file name or a list of them, got {name!r}")
        target = path.parent / name
        if not target.is_file():
            why = "is a folder" if target.is_dir() else "does not exist"
            raise RLBenchError(f"workload file {path}: include: {target} {why}; name a YAML file beside {path.name}")
        found.append(target)
    return found


def _read_mapping(path: Path, seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    if path.resolve() in seen:
        raise RLBenchError(f"workload file {path}: include cycle through {path.name}")
    raw = read_yaml(path, "workload file")
    if not isinstance(raw, dict):
        raise RLBenchError(f"workload file {path} must hold a mapping of fields, got {type(raw).__name__}")
    base: dict[str, Any] = {}
    for included in _include_paths(path, raw.pop("include", None)):  # later ones override earlier ones,
        base = _merge(base, _read_mapping(included, seen + (path.resolve(),)))  # the file itself overrides all
    return _merge(base, raw)


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _build(cls: type, values: Any, where: str) -> Any:
    """Construct dataclass `cls` from a mapping, rejecting unknown or missing keys by name."""
    if not isinstance(values, dict):
        raise ValueError(f"{where}: must be a mapping, got {type(values).__name__}")
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"{where}.{unknown[0]}: unknown field; known fields: {', '.join(sorted(known))}")
    try:
        return cls(**values)
    except TypeError as exc:  # a required field is missing
        missing = str(exc).split("argument")[-1].strip().strip(":").strip()
        raise ValueError(f"{where}: missing required field {missing}") from None


def workload_from_mapping(values: dict[str, Any]) -> Workload:
    """Build a `Workload` from an already-read mapping (raises ValueError naming the field)."""
    values = dict(values)
    for key, cls in _SECTIONS.items():
        if values.get(key) is not None:  # `target: null` (or none) is a workload without a target
            values[key] = _build(cls, values[key], key)
    if "model" in values:
        model = dict(values["model"]) if isinstance(values["model"], dict) else values["model"]
        if isinstance(model, dict) and model.get("tiny") is not None:
            model["tiny"] = _build(TinyModelSpec, model["tiny"], "model.tiny")
        values["model"] = _build(ModelSpec, model, "model")
    return _build(Workload, values, "workload")


def load_workload(name_or_path: str) -> Workload:
    """Load and check a workload; any problem becomes one `RLBenchError` naming file and field."""
    path = resolve_path(name_or_path)
    values = _read_mapping(path)
    try:
        workload = workload_from_mapping(values)
    except ValueError as exc:
        raise RLBenchError(f"workload file {path}: {exc}") from None
    if workload.name != path.stem:
        raise RLBenchError(f"workload file {path}: name: '{workload.name}' must equal the file name '{path.stem}'")
    return workload
