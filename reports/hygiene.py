"""Measurement hygiene of a run: was the host shared, how much did steps vary, is the model's floor known.

A step time is only worth comparing when the machine gave the framework what it
asked for. From the record alone (its summary and prediction.json) this finds:
- contention: CPU used by other processes during the steps, in cores, i.e. the
  host's system-wide CPU (% of all cores) minus the framework's process tree
  (rlbench.harness.record.contention, which compare and nightly read too);
- spread: the coefficient of variation (std / mean) of step time after warm-up;
- too few steps for `rlbench compare` to decide anything (regression.samples_needed);
- a CPU prediction without the framework floor that `rlbench calibrate` measures,
  which leaves measured/predicted large for a reason that is not the run's.

    from rlbench.reports.hygiene import hygiene
    hygiene(run).warnings
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rlbench.harness.record.contention import contention, other_cpu_cores
from rlbench.harness.record.regression import samples_needed
from rlbench.reports.load import RunView

HIGH_CV = 0.15  # steps of one steady-state run usually vary by a few percent; 15% means something moved


@dataclass(frozen=True)
class Hygiene:
    step_time_cv: float | None  # std / mean of post-warm-up step times
    host_cpu_pct: float | None  # system-wide, 0-100 over all cores, mean over steps
    framework_cpu_cores: float | None  # the framework's process tree, in cores
    other_cpu_cores: float | None  # everything else on the host, in cores
    steps: int  # post-warm-up steps measured
    floor: str  # "calibrated", "not calibrated", or "n/a" (GPU rows, no prediction)
    warnings: list[str] = field(default_factory=list)


def _floor_status(run: RunView) -> str:
    prediction = run.prediction or {}
    if not prediction.get("available") or (run.record.get("environment") or {}).get("gpus"):
        return "n/a"
    floor = prediction.get("floor") or {}
    return "not calibrated" if "reason" in floor or not floor else "calibrated"


def hygiene(run: RunView) -> Hygiene:
    summary = run.record.get("summary") or {}
    step = summary.get("step_time_s") or {}
    n = int(step.get("n") or 0)
    mean, std = step.get("mean"), step.get("std")
    cv = std / mean if n > 1 and mean and std is not None else None
    other, host, framework_cores = other_cpu_cores(run.record)
    framework = run.record["framework"].get("name", "?") if isinstance(run.record.get("framework"), dict) else "?"
    floor = _floor_status(run)
    warnings = []
    if shared := contention(run.record):
        warnings.append(shared)
    warnings += [f"data error: {line}" for line in run.record.get("data_errors") or [] if isinstance(line, str)]
    if cv is not None and cv > HIGH_CV:
        warnings.append(f"step time varies {cv:.0%} between steps (coefficient of variation, n={n})")
    needed = samples_needed(0.05)
    if 0 < n < needed:
        warnings.append(f"{n} post-warm-up step(s): compare needs {needed} per side to decide; run more --steps")
    if floor == "not calibrated":
        warnings.append(
            f"framework floor not calibrated on this machine: measured/predicted includes {framework}'s "
            f"per-step overhead; run `rlbench calibrate --framework {framework}`"
        )
    return Hygiene(cv, host, framework_cores, other, n, floor, warnings)


def hygiene_rows(runs: list[RunView]) -> tuple[list[str], list[list[str]]]:
    """The report's hygiene table: one row per run that has a summary."""
    headers = [
        "run",
        "post-warm-up steps",
        "step time CV",
        "host CPU (%)",
        "framework CPU (cores)",
        "other processes (cores)",
        "framework floor",
        "warnings",
    ]
    rows = []
    for run in runs:
        if not run.record.get("summary"):
            continue
        h = hygiene(run)
        rows.append(
            [
                run.label,
                str(h.steps),
                "–" if h.step_time_cv is None else f"{h.step_time_cv:.1%}",
                _fmt(h.host_cpu_pct),
                _fmt(h.framework_cpu_cores),
                _fmt(h.other_cpu_cores),
                h.floor,
                "; ".join(h.warnings) or "none",
            ]
        )
    return headers, rows


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.2g}" if value < 10 else f"{value:.0f}"
