"""Time to target compared between configurations over their seeds: two sweep folders (`rlbench compare
SWEEP_A SWEEP_B`), or every pair of configurations inside one sweep (`rlbench compare SWEEP`, e.g. three
frameworks on one workload, each with --repeats 5 --vary-seed).

Each pair gets record.olympic's rank test and verdict, with its small-n honesty; a pair whose workloads or
targets differ is not compared, and says so. The second configuration of a pair (in the sweep's order) is
judged against the first.

    rlbench sweep --framework trl,verl,openrlhf --workload gsm8k-format-grpo-tiny --repeats 5 --vary-seed
    rlbench compare results/<sweep>
"""

from __future__ import annotations

from itertools import combinations
from pathlib import Path
from typing import Any

from rlbench.harness.errors import RLBenchError
from rlbench.harness.record.olympic import compare_times
from rlbench.harness.record.spread import cell_label
from rlbench.harness.record.sweep_index import load_index

_WORDS = {
    "faster": "reaches the target faster than",
    "slower": "reaches the target slower than",
    "not distinguishable": "is not distinguishable in time to target from",
    "undecidable": "cannot be told apart in time to target from",
}


def target_groups(sweep_dir: Path) -> list[dict[str, Any]]:
    """The configurations of a sweep folder whose workload has a quality target (sweep.json read once)."""
    return [g for g in load_index(sweep_dir).get("groups", []) if g.get("target")]


def _one(sweep_dir: Path) -> dict[str, Any]:
    groups = target_groups(sweep_dir)
    if len(groups) != 1:
        found = ", ".join(cell_label(g) for g in groups) or "none"
        raise RLBenchError(
            f"{sweep_dir}: compare of two sweeps needs one configuration with a time to target in each, found "
            f"{len(groups)} ({found}); sweep one framework and layout with --repeats 5 --vary-seed on a workload "
            "with a target, or pass this sweep alone to compare its configurations with each other"
        )
    return groups[0]


def _same_target(base: dict[str, Any], cand: dict[str, Any]) -> str | None:
    """Why two configurations' times to target cannot be compared, or None."""
    a, b = base["target"], cand["target"]
    if (base["workload"], a["metric"], a["value"]) == (cand["workload"], b["metric"], b["value"]):
        return None
    return (
        f"the targets differ ({base['workload']} {a['metric']} >= {a['value']:g} against {cand['workload']} "
        f"{b['metric']} >= {b['value']:g})"
    )


def verdict(base_label: str, base: dict[str, Any], cand_label: str, cand: dict[str, Any]) -> dict[str, Any]:
    """Candidate against baseline on time to target (two `target_spread` results): the rank test's result and
    one verdict line with the median ratio, n, how many reached, and p or why there is none."""
    result = compare_times(base["seconds_per_run"], cand["seconds_per_run"])
    ratio = f"x{result['ratio']:.3g} in median" if result["ratio"] is not None else "no median ratio"
    n = f"n = {result['n_base']}/{result['n_cand']}, reached {result['reached_base']}/{result['reached_cand']}"
    p = f"p = {result['p_value']:.2g}" if result.get("p_value") is not None else result.get("why", "")
    line = f"verdict: {cand_label} {_WORDS[result['verdict']]} {base_label} ({ratio}, {n}; Mann-Whitney {p})"
    return {**result, "base": base_label, "cand": cand_label, "line": line}


def compare_sweep_targets(baseline: Path, candidate: Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Two sweeps' time to target over their seeds: each sweep's configuration and the verdict."""
    base, cand = _one(baseline), _one(candidate)
    if why := _same_target(base, cand):
        raise RLBenchError(f"{why}; compare sweeps of one workload and target")
    return base, cand, verdict(cell_label(base), base["target"], cell_label(cand), cand["target"])


def pairwise(configurations: list[tuple[str, str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Every pair of (label, workload, target_spread) configurations, the later judged against the earlier;
    a pair on different workloads or targets has `verdict` None and says why in `line`."""
    out = []
    for (label_a, workload_a, a), (label_b, workload_b, b) in combinations(configurations, 2):
        why = _same_target({"workload": workload_a, "target": a}, {"workload": workload_b, "target": b})
        if why:
            out.append({"base": label_a, "cand": label_b, "verdict": None, "line": f"not compared: {why}"})
        else:
            out.append(verdict(label_a, a, label_b, b))
    return out


def compare_within_sweep(sweep_dir: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One sweep's configurations with a time to target, and the verdict of every pair of them."""
    groups = target_groups(sweep_dir)
    if len(groups) < 2:
        found = ", ".join(cell_label(g) for g in groups) or "none"
        raise RLBenchError(
            f"{sweep_dir}: compare of one sweep needs two or more configurations with a time to target, found "
            f"{len(groups)} ({found}); sweep several frameworks or layouts with --repeats 5 --vary-seed on a "
            "workload with a target, or pass a second sweep to compare against"
        )
    return groups, pairwise([(cell_label(g), g["workload"], g["target"]) for g in groups])
