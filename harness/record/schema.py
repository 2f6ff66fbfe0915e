"""The step vocabulary: every column of `steps.parquet`, and the files of a run folder.

One module defines the normalized vocabulary that all adapters map their
framework's metrics into. Each metric declares its unit and its direction
("higher" or "lower" is better; "neutral" for counts that describe the work done
rather than how well it was done). run.json's fields, their checks and their
migration are `rlbench.harness.record.run_record`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

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
        *[
            _m(
                f"response_length_p{q}",
                "tokens",
                "neutral",
                f"the step's {q}th-percentile response length, nearest rank, from each response the framework "
                "generated (TRL and OpenRLHF through rlbench's hooks; NaN for verl, which logs the mean and "
                "longest only)",
            )
            for q in (50, 90, 99)
        ],
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


# The record's files, in one run folder (record.store writes them, record.read reads them).
RUN_FILE, STEPS_FILE, PREDICTION_FILE = "run.json", "steps.parquet", "prediction.json"
# spans.parquet: stage calls with their real start and end, where the framework's log has them (Adapter.read_spans)
SPANS_FILE = "spans.parquet"
SPAN_COLUMNS = ("step", "stage", "start_unix_s", "end_unix_s")
