"""rlbench's own cost around the framework: run.json's `overhead`, per step where it recurs.

What that costs the framework's step time is measured by benchmarks/rlbench_overhead.py (with and without)."""

from __future__ import annotations

from typing import Any

import pandas as pd


def overhead(
    setup_s: float,
    parent_cpu_s: float,
    steps: pd.DataFrame,
    framework_wall_s: float,
    record_s: float,
    telemetry: dict[str, Any] | None = None,
    cores: int | None = None,
) -> dict[str, float | None]:
    """Time around the framework, and while it ran the sampler's and the runner's CPU as a share of all the CPU
    the run used and of the machine's cores."""
    n = max(len(steps), 1)
    in_steps = float(steps["step_time_s"].sum()) if not steps.empty else 0.0
    telemetry = telemetry or {}
    sampler = telemetry.get("loop_cpu_s", telemetry.get("sampler_cpu_s"))
    framework = telemetry.get("framework_cpu_s")
    ours = parent_cpu_s + (sampler or 0.0)
    return {
        "setup_s": setup_s,  # data, tokenizer, tiny model (cached after the first run), record start
        "record_s": record_s,  # reading metrics, writing steps.parquet and run.json
        "parent_cpu_s_per_step": parent_cpu_s / n,  # progress polling while the framework runs
        # Framework process start-up (imports, model load) plus teardown: outside any step.
        "framework_outside_steps_s": framework_wall_s - in_steps if not steps.empty else None,
        "parent_cpu_s": parent_cpu_s,
        "sampler_cpu_s": sampler,  # its sampling loop (start-up and the final write excluded)
        "framework_cpu_s": framework,
        # rlbench's CPU over all the CPU the run used (fraction, lower is better)
        "cpu_share_of_run": ours / (ours + framework) if framework else None,
        # rlbench's CPU over the machine's capacity while the framework ran (fraction of cores x wall)
        "share_of_machine": ours / (framework_wall_s * cores) if cores and framework_wall_s > 0 else None,
    }
