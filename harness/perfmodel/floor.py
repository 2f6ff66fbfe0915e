"""A framework's per-step time floor, measured from calibration runs where the arithmetic is negligible.

The roofline and the depth term (roofline.py) price a stage's arithmetic and its kernel chain.
What they do not price is the framework's own Python around them: Hugging Face `generate`'s
logits processors, stopping criteria and cache bookkeeping on every decode step, and the
Trainer's per-step work (optimizer and scheduler step, gradient clipping, TRL's metric
gathering and logging). No hardware probe measures that; it belongs to the framework.

So it is measured the only honest way: real runs of the same framework on a model so small
(hidden 64) that the model predicts almost no time, at two response lengths L1 < L2. For each
measured stage (rlbench's stage columns, time_<stage>_s) the floor is what the model leaves
unexplained there, excess = measured - predicted:
* generation: fixed + per_decode_step * L (the generate loop pays its bookkeeping once per token):
  the line through the points (least squares with more than two lengths);
* update_actor: fixed only (the Trainer pays once per optimizer step): the mean excess.
A negative excess is clipped to 0: a floor cannot make a stage faster than its arithmetic.
`predict(..., floor=...)` adds it to the model stage that pays it (MODEL_STAGE: the decode loop
for generation, the actor update for update_actor), so step time, tokens/s and MFU include it.
The calibration cells are outside the grid the model is validated on, so nothing is fitted
to the cells it predicts.

    floor = measure_floor([(8, {"gen": 0.06, "update_actor": 0.13}, {"gen": 0.018, "update_actor": 0.032}),
                           (16, {"gen": 0.10, "update_actor": 0.15}, {"gen": 0.031, "update_actor": 0.035})])
    floor.seconds("gen", response_len=32)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from rlbench.harness.perfmodel.roofline import StageCost, largest_term

# Which stages pay a floor per decode step (generation) and which once per step (the rest).
PER_DECODE_STEP = frozenset({"gen"})
# The model stage that pays each measured floor: generate's bookkeeping runs in the decode loop,
# the Trainer's once per optimizer step beside the actor update.
MODEL_STAGE = {"gen": "generation_decode", "update_actor": "actor_update"}


@dataclass(frozen=True, kw_only=True, slots=True)
class FrameworkFloor:
    fixed_s: dict[str, float]  # seconds per step, by stage
    per_decode_step_s: dict[str, float]  # seconds per generated token position, by stage
    source: str = ""

    def seconds(self, stage: str, response_len: int) -> float:
        """The floor added to a stage's predicted time at this response length (0 for an unknown stage)."""
        return self.fixed_s.get(stage, 0.0) + self.per_decode_step_s.get(stage, 0.0) * response_len

    def to_dict(self) -> dict[str, object]:
        return {"fixed_s": self.fixed_s, "per_decode_step_s": self.per_decode_step_s, "source": self.source}

    @classmethod
    def from_dict(cls, data: dict) -> FrameworkFloor:
        return cls(
            fixed_s=dict(data["fixed_s"]),
            per_decode_step_s=dict(data["per_decode_step_s"]),
            source=str(data.get("source", "")),
        )


def apply_floor(stages: list[StageCost], floor: FrameworkFloor, response_len: int) -> list[StageCost]:
    """Stages with the floor added to the time (and both Brent bounds) of the stage that pays it."""
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
    return out


Calibration = tuple[int, dict[str, float], dict[str, float]]  # (response_len, measured_s, predicted_s) by stage


def _slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope through (x, y) points with two distinct x at least."""
    n = len(points)
    mean_x, mean_y = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x, _ in points)


def measure_floor(cells: list[Calibration], source: str = "") -> FrameworkFloor:
    """The floor from calibration cells at two (or more) response lengths; see the module docstring.

    With more than two lengths the generation line is a least-squares fit of excess on length."""
    if len({length for length, _, _ in cells}) < 2:
        raise ValueError("a framework floor needs calibration runs at two response lengths at least")
    stages = set.intersection(*(set(m) & set(p) for _, m, p in cells))
    fixed, per_step = {}, {}
    for stage in sorted(stages):
        excess = [(float(length), m[stage] - p[stage]) for length, m, p in cells]
        if stage in PER_DECODE_STEP:
            slope = max(_slope(excess), 0.0)
            per_step[stage] = slope
            # The intercept under the (clipped) slope: the line passes through the mean point.
            fixed[stage] = max(sum(y - slope * x for x, y in excess) / len(excess), 0.0)
        else:
            fixed[stage] = max(sum(y for _, y in excess) / len(excess), 0.0)
    return FrameworkFloor(fixed_s=fixed, per_decode_step_s=per_step, source=source)
