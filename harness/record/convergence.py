"""Convergence reference: a run's learning curve checked against the band of its configuration's first clean
runs (MLPerf Training's reference convergence points), so a release that breaks learning fails the night even
if its steps got faster. Pure code, no I/O.

A curve is a quality metric per step, as the target judges it: the mean of the target's metric over its
window of steps (any metric logged per step, e.g. reward_mean or a held-out accuracy). The reference is the
first `REFERENCE_RUNS` clean runs of one configuration (the nightly keeps them in its baseline folder). At each
step where at least `MIN_REFERENCE_RUNS` of them have a value the band is their min..max, with n. Target
metrics are higher-is-better: a run is flagged where its curve lies below the band's lower edge by more than
`TOLERANCE`; above the band is faster learning and only reported.

What a flag means: a run exchangeable with n reference runs lies below all of them at one step with chance
1/(n+1) (1/6 at n = 5) before the tolerance; the tolerance, in the metric's own units, is what keeps a run
that learns as the reference did from being flagged for its sampling noise, and it is stated beside every
verdict. The band covers only the steps the reference runs reached: a reference run stopped at the target
has no later steps, and later steps of a slower run are not compared (`compared_steps` says how many were).

    reference_check(curve, [ref_a, ref_b, ref_c])   # {"verdict": "within", "compared_steps": 12, ...}
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from rlbench.harness.record.time_to_target import metric_curve

REFERENCE_RUNS = 5  # MLPerf Training's run count for most benchmarks: the first 5 clean runs are the reference
MIN_REFERENCE_RUNS = 3  # fewer runs than this give no band: min..max of 2 runs says little about a third
TOLERANCE = 0.05  # in the metric's units; target metrics are fractions in [0, 1] (workloads/spec.py TargetSpec)


def target_curve(steps: pd.DataFrame, metric: str, window: int) -> pd.Series | None:
    """The moving mean of `metric` over `window` steps, indexed by step (the curve the target is judged on);
    None when the steps do not log the metric."""
    if steps is None or steps.empty or "step" not in steps or metric not in steps:
        return None
    ordered = steps.sort_values("step").reset_index(drop=True)
    curve = metric_curve(ordered, metric, window)
    curve.index = ordered.loc[curve.index, "step"].astype(int).to_numpy()
    return curve.dropna()


def band(reference: list[pd.Series]) -> pd.DataFrame:
    """Per step (the index): how many reference curves have a value there (n), and their min, max and mean."""
    if not reference:
        return pd.DataFrame(columns=["n", "min", "max", "mean"])
    table = pd.concat([curve.rename(i) for i, curve in enumerate(reference)], axis=1)
    return pd.DataFrame(
        {"n": table.notna().sum(axis=1), "min": table.min(axis=1), "max": table.max(axis=1), "mean": table.mean(axis=1)}
    ).sort_index()


def reference_check(
    curve: pd.Series,
    reference: list[pd.Series],
    tolerance: float = TOLERANCE,
    min_runs: int = MIN_REFERENCE_RUNS,
) -> dict[str, Any]:
    """`curve` (per step) against the band of the `reference` curves: verdict "below" (flagged), "within", or
    "not judged" with why; the first step below the band with the band there, and the steps compared."""
    out: dict[str, Any] = {
        "n_reference": len(reference),
        "tolerance": tolerance,
        "band": f"min..max of the reference runs' curves per step, lower edge minus {tolerance:g}",
        "compared_steps": 0,
        "below_steps": [],
        "above_steps": [],
        "flagged": False,
    }
    if len(reference) < min_runs:
        return {
            **out,
            "verdict": "not judged",
            "why": f"the reference has {len(reference)} run(s), fewer than the {min_runs} a band needs",
        }
    edges = band(reference)
    edges = edges[edges["n"] >= min_runs]
    shared = curve.dropna().index.intersection(edges.index)
    if not len(shared):
        return {
            **out,
            "verdict": "not judged",
            "why": f"no step where the run and at least {min_runs} reference runs have a value",
        }
    values, edges = curve.loc[shared], edges.loc[shared]
    below = shared[(values < edges["min"] - tolerance).to_numpy()]
    above = shared[(values > edges["max"] + tolerance).to_numpy()]
    out.update(
        compared_steps=int(len(shared)),
        below_steps=[int(s) for s in below],
        above_steps=[int(s) for s in above],
        flagged=bool(len(below)),
        verdict="below" if len(below) else "within",
    )
    if len(below):
        step = below[0]
        out["first_below"] = {
            "step": int(step),
            "value": float(values.loc[step]),
            "band_min": float(edges.loc[step, "min"]),
            "band_max": float(edges.loc[step, "max"]),
            "n": int(edges.loc[step, "n"]),
        }
    return out


def check_text(check: dict[str, Any], metric: str) -> str:
    """One line for the night: the reference verdict with its n, tolerance and, when flagged, where."""
    if check["verdict"] == "not judged":
        return f"convergence reference: not judged ({check['why']})"
    head = f"convergence reference ({check['n_reference']} runs, {check['compared_steps']} steps compared"
    if check["verdict"] == "within":
        return f"{head}): {metric} within the band (tolerance {check['tolerance']:g})"
    first = check["first_below"]
    return (
        f"{head}): {metric} BELOW the band at {len(check['below_steps'])} step(s), first at step {first['step']}: "
        f"{first['value']:.3g} against {first['band_min']:.3g}-{first['band_max']:.3g} (n = {first['n']}) minus "
        f"{check['tolerance']:g}"
    )
