"""Sweep parallel layouts: every combination of a grid over ParallelShape fields, ranked by step time.

A combination ParallelShape rejects (e.g. tp*pp*sp not dividing the trainer's GPUs) is skipped
with its reason; pass a list as `skipped` to collect (combination, reason) pairs. Unless `dp`
is itself in the grid it is re-derived for each combination, so sweeping `gpus` or `tp` works.
Predictions without a step time (an unknown link) rank last; equal times rank by memory per GPU.

    from rlbench.perfmodel import ParallelShape, WorkloadShape, sweep
    work = WorkloadShape(prompts_per_step=32, group_size=8, prompt_len=512, response_len=1024)
    skipped = []
    ranked = sweep(ParallelShape(gpus=16), {"tp": [1, 2, 4], "rollout_tp": [1, 2]},
                   arch="Qwen2.5-7B-Instruct", shape=work, hardware="H100-SXM", skipped=skipped)
    best_layout, best = ranked[0]
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

from rlbench.perfmodel.arch import ModelArch
from rlbench.perfmodel.hardware import Hardware
from rlbench.perfmodel.names import lookup
from rlbench.perfmodel.predict import Prediction, predict
from rlbench.perfmodel.shapes import ParallelShape, WorkloadShape

FIELDS = tuple(f.name for f in dataclasses.fields(ParallelShape))


def sweep(base_parallel: ParallelShape, grid: dict[str, list[Any]], *, arch: ModelArch | str,
          shape: WorkloadShape, hardware: Hardware | str,
          skipped: list[tuple[dict[str, Any], str]] | None = None,
          **predict_kwargs: Any) -> list[tuple[ParallelShape, Prediction]]:
    """Predict every valid combination of `grid` applied to `base_parallel`; fastest first."""
    for key in grid:
        lookup({f: f for f in FIELDS}, key, "ParallelShape field")  # did-you-mean on a typo
        if key not in FIELDS:  # matched only loosely (case, punctuation): insist on the real name
            raise ValueError(f"sweep grid key {key!r}: use the field name exactly ({', '.join(FIELDS)})")
    keys = list(grid)
    base = {f: getattr(base_parallel, f) for f in FIELDS}
    if "dp" not in grid:
        base["dp"] = None
    results: list[tuple[ParallelShape, Prediction]] = []
    for values in itertools.product(*(grid[k] for k in keys)):
        combo = dict(zip(keys, values))
        try:
            layout = ParallelShape(**{**base, **combo})
        except ValueError as exc:
            if skipped is not None:
                skipped.append((combo, str(exc)))
            continue
        results.append((layout, predict(arch, shape, layout, hardware, **predict_kwargs)))
    # Ties (a compute-bound roofline does not care how the same GPUs split) go to less memory.
    results.sort(key=lambda pair: (pair[1].step_time_s is None, pair[1].step_time_s or 0.0,
                                   pair[1].memory_per_gpu_gb))
    return results
