"""What `rlbench run` prints when a run ends: the headline figures with their n, any hygiene warning, the next command.

Read from the finished record alone, like every report, so what the console says
and what `rlbench report` shows are the same numbers.

    rlbench run --framework trl --workload gsm8k-grpo-tiny   # ends with these lines on stderr
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from rlbench.harness.record.schema import STEP_METRICS
from rlbench.harness.record.schema import headline as headline_metrics
from rlbench.reports.hygiene import hygiene
from rlbench.reports.load import load_runs
from rlbench.reports.tables import peak_memory_metric

# A finished run's figures, also each sweep cell's row (sweep_views.grid_rows): the registry's "run" view.
RUN_METRICS = headline_metrics("run")


def _figure(summary: dict[str, Any], name: str, unit: str, scale: float = 1.0, digits: int = 3) -> str | None:
    s = summary.get(name)
    if not s or s.get("median") is None or not math.isfinite(s["median"]):
        return None
    arrow = {"higher": "higher is better", "lower": "lower is better"}.get(s.get("direction", ""), "")
    return (
        f"{s['median'] * scale:.{digits}g} {unit} ± {s.get('std', 0.0) * scale:.2g} "
        f"(median ± std over n={s['n']} post-warm-up steps; {arrow})"
    )


def headline(run_dir: Path) -> list[str]:
    """A few lines on the finished run in `run_dir`; empty when its record cannot be read."""
    runs = load_runs([run_dir], [])
    if not runs:
        return []
    run = runs[0]
    summary = run.record.get("summary") or {}
    lines = []
    for metric in (STEP_METRICS[name] for name in RUN_METRICS):
        figure = _figure(summary, metric.name, metric.display_unit, metric.scale)
        if figure:
            lines.append(f"{metric.title:<12} {figure}")
    memory = peak_memory_metric(summary)
    figure = _figure(summary, memory, "GB")
    if figure:
        lines.append(f"{'peak memory':<12} {figure}" + ("" if memory == "peak_device_memory_gb" else " (host)"))
    first = run.record.get("time_to_first_step_s")
    if isinstance(first, (int, float)) and math.isfinite(first):
        lines.append(f"{'first step':<12} {first:.3g} s after launch (imports, model load, engine start, step 1)")
    step = (run.record.get("vs_model") or {}).get("step")
    if step:
        lines.append(
            f"{'vs model':<12} measured / predicted step time {step['measured_over_predicted']:.3g} "
            f"({step['measured_s']:.3g} s / {step['predicted_s']:.3g} s)"
        )
    share = (run.record.get("overhead") or {}).get("cpu_share_of_run")
    if isinstance(share, (int, float)) and math.isfinite(share):
        lines.append(f"{'rlbench':<12} its sampler and runner used {share:.1%} of the run's CPU")
    lines += [f"warning: {w}" for w in hygiene(run).warnings]
    lines.append(f"next: rlbench report {run_dir} --out report.html")
    return lines
