"""The nightly job's configuration: which benchmarks to run, where the baseline lives.

The matrix and the baseline location are data in a YAML file (`benchmarks/nightly-verl.yaml`),
not code, so a GPU fleet changes them without a release. `${VAR}` in paths is
expanded from the environment (e.g. a runner's persistent disk). Every problem is
one `RLBenchError` naming the key and the file.

    results: ${RLBENCH_NIGHTLY_DIR}/runs   # each night writes <results>/<night>/
    baseline: ${RLBENCH_NIGHTLY_DIR}/baseline
    threshold: 5%
    matrix:
      - {framework: verl, workload: gsm8k-grpo, parallel: [dp=8], steps: 15}
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from rlbench.harness.errors import RLBenchError
from rlbench.harness.record.compare import parse_threshold
from rlbench.harness.yaml_input import read_yaml

TOP_KEYS = {"results", "baseline", "threshold", "matrix"}
ENTRY_KEYS = {"framework", "workload", "parallel", "steps", "seed"}


@dataclass(frozen=True, slots=True)
class Benchmark:
    framework: str
    workload: str
    parallel: tuple[str, ...] = ()
    steps: int | None = None
    seed: int = 0


@dataclass(frozen=True, slots=True)
class NightlyConfig:
    results: Path
    baseline: Path
    threshold: float
    matrix: tuple[Benchmark, ...]


def _path(value: object, key: str, where: Path) -> Path:
    if not isinstance(value, str) or not value:
        raise RLBenchError(f"{where}: '{key}' must be a folder path")
    expanded = os.path.expandvars(value)
    if "$" in expanded:
        raise RLBenchError(f"{where}: '{key}: {value}' uses an unset environment variable; set it or write the path")
    path = Path(expanded).expanduser()
    return path if path.is_absolute() else where.parent / path


def _benchmark(entry: object, index: int, where: Path) -> Benchmark:
    name = f"{where}: matrix[{index}]"
    if not isinstance(entry, dict):
        raise RLBenchError(f"{name}: expected a mapping with framework and workload")
    unknown = set(entry) - ENTRY_KEYS
    if unknown:
        raise RLBenchError(
            f"{name}: unknown key(s) {', '.join(sorted(unknown))}; allowed: {', '.join(sorted(ENTRY_KEYS))}"
        )
    for key in ("framework", "workload"):
        if not isinstance(entry.get(key), str):
            raise RLBenchError(f"{name}: '{key}' is required (a name, as for `rlbench run --{key}`)")
    parallel = entry.get("parallel", [])
    if not isinstance(parallel, list) or not all(isinstance(p, str) and "=" in p for p in parallel):
        raise RLBenchError(f"{name}: 'parallel' must be a list of KEY=VALUE strings, e.g. [dp=8, rollout_tp=2]")
    steps, seed = entry.get("steps"), entry.get("seed", 0)
    if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 1):
        raise RLBenchError(f"{name}: 'steps' must be a positive integer, got {steps!r}")
    from rlbench.harness.spec.runspec import check_seed

    check_seed(seed, f"{name}: 'seed'")  # bounded as `run --seed` is, before the first benchmark runs
    return Benchmark(entry["framework"], entry["workload"], tuple(parallel), steps, seed)


def check_matrix(config: NightlyConfig, where: Path) -> None:
    """Refuse, before the first benchmark runs, every entry `rlbench run` would refuse whatever the machine: an
    unknown framework or workload, a bad knob, a layout its framework cannot take. (A framework not installed
    here is the night's environment, not its config: that benchmark is reported as not run.)"""
    from rlbench.adapters.registry import get_adapter
    from rlbench.harness.spec.runspec import build_run_spec

    for index, bench in enumerate(config.matrix):
        try:
            adapter = get_adapter(bench.framework)
            spec = build_run_spec(
                bench.framework, bench.workload, bench.parallel, steps=bench.steps, seed=bench.seed, out=config.results
            )
            for knob, value in spec.parallel.non_default().items():
                if knob not in adapter.supported_knobs:
                    raise RLBenchError(f"--parallel {knob}={value}: not supported by the {adapter.name} adapter")
            adapter.refuse_knobs(spec)
        except RLBenchError as exc:
            raise RLBenchError(f"{where}: matrix[{index}]: {exc}") from None


def load_nightly_config(path: Path) -> NightlyConfig:
    if not path.is_file():
        raise RLBenchError(
            f"nightly config {path} not found; pass --config with a nightly YAML file "
            "(the repository's benchmarks/nightly-trl.yaml, -verl.yaml, -openrlhf.yaml, or your own)"
        )
    data = read_yaml(path, "nightly config")
    if not isinstance(data, dict):
        raise RLBenchError(f"{path}: expected a mapping with keys {', '.join(sorted(TOP_KEYS))}")
    unknown = set(data) - TOP_KEYS
    if unknown:
        raise RLBenchError(
            f"{path}: unknown key(s) {', '.join(sorted(unknown))}; allowed: {', '.join(sorted(TOP_KEYS))}"
        )
    matrix = data.get("matrix")
    if not isinstance(matrix, list) or not matrix:
        raise RLBenchError(f"{path}: 'matrix' must be a non-empty list of benchmarks")
    config = NightlyConfig(
        results=_path(data.get("results"), "results", path),
        baseline=_path(data.get("baseline"), "baseline", path),
        threshold=parse_threshold(data.get("threshold", "5%"), f"{path}: threshold"),
        matrix=tuple(_benchmark(e, i, path) for i, e in enumerate(matrix)),
    )
    for key in ("results", "baseline"):  # a file there would let a night "pass" with "no baseline yet"
        folder = getattr(config, key)
        if folder.exists() and not folder.is_dir():
            raise RLBenchError(f"{path}: '{key}: {folder}' is a file, not a folder; point it at a folder")
    check_matrix(config, path)
    return config
