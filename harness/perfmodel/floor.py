"""A framework's per-step time floor, measured from calibration runs where the arithmetic is negligible.

The roofline and the depth term (roofline.py) price a stage's arithmetic and its kernel chain.
What they do not price is the framework's own code around them: Hugging Face `generate`'s
logits processors and cache bookkeeping on every decode step, the Trainer's optimizer step and
logging, and on the Ray lanes every hop between processes: verl's and OpenRLHF's Ray calls that
ship a batch to a worker and back, the HTTP round trips to their rollout servers, the weight-sync
path (gather, serialise, load into the engine), the driver's batching and metric code between
stages. No hardware probe measures that; it belongs to the framework.

So it is measured the only honest way: real runs of the same framework on a model so small
(hidden 64) that the model predicts almost no time, at two or more response lengths. For each
stage column the framework logs (rlbench's time_<stage>_s; MODEL_STAGE) the floor is what the
model leaves unexplained there, excess = measured - predicted, and one more column, "other":
the step's time outside every timed stage (step time minus the logged stages, which the model
predicts as 0: the driver's own work between stages). Each is a line in the response length L,
fitted by least squares over the cells:
* fixed + per_decode_step * L for generation (the generate loop pays its bookkeeping per token);
* for every other column the slope is kept only where the data support it: it exceeds twice its
  standard error, propagated from each cell's spread (the standard error of its median); else
  the column is fixed only, the mean excess. A cell without a spread cannot support a slope.
  The weight sync is fixed only: it moves the same bytes at any response length.
A negative excess is clipped to 0: a floor cannot make a stage faster than its arithmetic. A
column the framework does not log is absent from the cells and so from the floor (it adds 0).
`predict(..., floor=...)` adds each column's floor to the model stage that pays it (MODEL_STAGE),
and "other" as a stage of its own (UNSTAGED, in the step's sync group), so step time, tokens/s and
MFU include it. The calibration cells are tiny runs of their own; the run being judged is never
one of them.

    floor = measure_floor([(8, {"gen": 0.06, "update_actor": 0.13}, {"gen": 0.018, "update_actor": 0.032}),
                           (16, {"gen": 0.10, "update_actor": 0.15}, {"gen": 0.031, "update_actor": 0.035})])
    floor.seconds("gen", response_len=32)
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from rlbench.harness.perfmodel.roofline import StageCost, empty_stage, largest_term

# Generation always pays per decode step; any other column only where its cells show a slope, except
# the weight sync, which moves the weights, the same bytes at any response length.
PER_DECODE_STEP = frozenset({"gen"})
FIXED_ONLY = frozenset({"weight_sync"})
UNSTAGED = "unstaged"  # the model stage that holds the step's time outside every timed stage
# Measured column -> the model stage that pays its floor: generate's bookkeeping runs in the decode
# loop, the Trainer's once per optimizer step beside the actor update, a Ray call beside the pass
# it carries, the driver's work between stages in a stage of its own.
MODEL_STAGE = {
    "gen": "generation_decode",
    "reward": "reward",
    "old_log_prob": "old_logprob",
    "ref": "ref_logprob",
    "values": "critic_values",
    "adv": "advantage",
    "update_actor": "actor_update",
    "update_critic": "critic_update",
    "weight_sync": "weight_sync",
    "other": UNSTAGED,
}
SLOPE_SIGMAS = 2.0  # a per-decode-step term outside generation must exceed this many standard errors


@dataclass(frozen=True, kw_only=True, slots=True)
class FrameworkFloor:
    fixed_s: dict[str, float]  # seconds per step, by measured column
    per_decode_step_s: dict[str, float]  # seconds per generated token position, by measured column
    source: str = ""

    def seconds(self, stage: str, response_len: int) -> float:
        """The floor added to a column's predicted time at this response length (0 for a column not fitted)."""
        return self.fixed_s.get(stage, 0.0) + self.per_decode_step_s.get(stage, 0.0) * response_len

    def to_dict(self) -> dict[str, object]:
        # "pays": which model stage each calibrated column's floor lands on, so a prediction names its sources
        pays = {column: MODEL_STAGE[column] for column in self.fixed_s if column in MODEL_STAGE}
        return {
            "fixed_s": self.fixed_s,
            "per_decode_step_s": self.per_decode_step_s,
            "pays": pays,
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, data: dict) -> FrameworkFloor:
        return cls(
            fixed_s=dict(data["fixed_s"]),
            per_decode_step_s=dict(data["per_decode_step_s"]),
            source=str(data.get("source", "")),
        )


def apply_floor(stages: list[StageCost], floor: FrameworkFloor, response_len: int) -> list[StageCost]:
    """Stages with each column's floor added to the time (and both Brent bounds) of the stage that pays it,
    and the unstaged time ("other") appended as a stage of its own where the calibration measured some."""
    extra = {MODEL_STAGE[m]: floor.seconds(m, response_len) for m in MODEL_STAGE}
    out = []
    for stage in stages:
        seconds = extra.get(stage.name, 0.0)
        if not seconds or stage.time_s is None:
            out.append(stage)
            continue
        bound = largest_term(
            stage.compute_time_s, stage.memory_time_s, stage.comm_time_s, stage.depth_time_s, framework=seconds
        )
        out.append(
            dataclasses.replace(
                stage,
                time_s=stage.time_s + seconds,
                floor_s=seconds,
                bound=bound,
                brent_lower_s=None if stage.brent_lower_s is None else stage.brent_lower_s + seconds,
                brent_upper_s=None if stage.brent_upper_s is None else stage.brent_upper_s + seconds,
            )
        )
    unstaged = extra[UNSTAGED]
    if unstaged and all(s.name != UNSTAGED for s in stages):
        # Host work between the timed stages (the driver's batching, metrics, Ray round trips): no device does it.
        stage = empty_stage(UNSTAGED, note="the framework's step time outside every timed stage (calibrated)")
        out.append(
            dataclasses.replace(
                stage,
                time_s=unstaged,
                floor_s=unstaged,
                brent_lower_s=unstaged,
                brent_upper_s=unstaged,
                bound="framework",
            )
        )
    return out


# (response_len, measured_s, predicted_s) by column, optionally with a 4th mapping: each measured
# median's standard error (what lets a column other than generation show a per-decode-step slope).
Calibration = (
    tuple[int, dict[str, float], dict[str, float]] | tuple[int, dict[str, float], dict[str, float], dict[str, float]]
)


def _line(points: list[tuple[float, float, float]]) -> tuple[float, float, float | None]:
    """Least-squares (intercept, slope, slope's standard error or None) through (x, y, se_y) points, two x at least.

    The slope's standard error propagates the points' own: var(b) = sum((x - mean x)^2 se^2) / Sxx^2."""
    n = len(points)
    mean_x, mean_y = sum(x for x, _, _ in points) / n, sum(y for _, y, _ in points) / n
    sxx = sum((x - mean_x) ** 2 for x, _, _ in points)
    slope = sum((x - mean_x) * (y - mean_y) for x, y, _ in points) / sxx
    errors = [se for _, _, se in points]
    se_slope = (
        None
        if any(math.isnan(e) for e in errors)
        else math.sqrt(sum((x - mean_x) ** 2 * se**2 for x, _, se in points)) / sxx
    )
    return mean_y - slope * mean_x, slope, se_slope


def measure_floor(cells: list[Calibration], source: str = "") -> FrameworkFloor:
    """The floor from calibration cells at two (or more) response lengths; see the module docstring.

    Only the columns measured in every cell are fitted: a stage the framework does not log has none."""
    if len({cell[0] for cell in cells}) < 2:
        raise ValueError("a framework floor needs calibration runs at two response lengths at least")
    columns = set.intersection(*(set(cell[1]) & set(cell[2]) for cell in cells))
    fixed, per_step = {}, {}
    for column in sorted(columns):
        points = [
            (
                float(cell[0]),
                cell[1][column] - cell[2][column],
                (cell[3] if len(cell) > 3 else {}).get(column, math.nan),
            )
            for cell in cells
        ]
        _, slope, se_slope = _line(points)
        supported = column in PER_DECODE_STEP or (
            column not in FIXED_ONLY and se_slope is not None and slope > SLOPE_SIGMAS * se_slope
        )
        slope = max(slope, 0.0) if supported else 0.0
        if supported:
            per_step[column] = slope
        # The intercept under the kept (clipped) slope: the line passes through the mean point.
        fixed[column] = max(sum(y - slope * x for x, y, _ in points) / len(points), 0.0)
    return FrameworkFloor(fixed_s=fixed, per_decode_step_s=per_step, source=source)
