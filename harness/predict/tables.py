"""Text tables for `rlbench predict`: one prediction's stages, or a ranked sweep."""

from __future__ import annotations

from typing import Any

from rlbench.harness.spec.parallel import knob_label


def _fmt(value: float | None, scale: float = 1.0, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value / scale:.{digits}g}"


def _depth_line(terms: dict[str, Any]) -> list[str]:
    """Generation's depth term, where the estimate has one (GPU rows)."""
    if terms.get("generation_depth_s") is None:
        return []
    lines = [
        f"  gen. depth   {_fmt(terms['generation_depth_s'])} s   ({terms['decode_depth_steps']} decode steps to the "
        f"batch's longest response x {_fmt(terms['decode_step_least_s'] * 1e3)} ms, the least a step takes: "
        "generation's floor however many GPUs)"
    ]
    if terms.get("generation_work_s") is not None:
        lines.append(
            f"  gen. Brent   {_fmt(terms['generation_brent_lower_s'])} .. {_fmt(terms['generation_brent_upper_s'])} s"
            f"   (max(W/p, D) .. W/p + D: work over the rollout GPUs W/p {_fmt(terms['generation_work_s'])} s, "
            f"depth D {_fmt(terms['generation_depth_s'])} s)"
        )
    return lines


def stage_table(prediction: dict[str, Any]) -> str:
    lines = [
        f"{'stage':<20} {'GFLOP':>10} {'GB moved':>9} {'comm GB':>8} {'time s':>9} {'bound':>8} {'estimate s':>10}"
    ]
    for stage in prediction["stages"]:
        comm = sum(stage["comm_bytes"].values()) if stage["comm_bytes"] else 0.0
        lines.append(
            f"{stage['name']:<20} {_fmt(stage['flops'], 1e9):>10} {_fmt(stage['bytes'], 1e9):>9} "
            f"{_fmt(comm, 1e9):>8} {_fmt(stage['time_s']):>9} {stage['bound']:>8} "
            f"{_fmt(stage.get('estimate_s')):>10}"
        )
    brent = prediction["brent"]
    lines += [
        "",
        f"step time      {_fmt(prediction['step_time_s'])} s   "
        f"(Brent: {_fmt(brent['lower_s'])} .. {_fmt(brent['upper_s'])} s)",
        f"  bound        {_fmt(prediction.get('step_time_bound_s'))} s   "
        "(what the hardware allows: roofline at 100% of peak)",
        f"  estimate     {_fmt(prediction.get('step_time_estimate_s'))} s   (bound plus overhead terms: achievable "
        "fraction of peak, kernel launches, engine per-step floor, TP all-reduce latency; per-step and per-token "
        "decode cost, colocated refit rate and the trainer's host time per layer fitted on published runs)",
        *_depth_line(prediction.get("estimate_terms") or {}),
        f"tokens/s       {_fmt(prediction['tokens_per_s'], digits=4)}   (estimate "
        f"{_fmt(prediction.get('tokens_per_s_estimate'), digits=4)})",
        # The model's MFU is what its roofline allows (compute-bound stages at 100% of dense peak): an upper
        # bound, never an estimate of a run's MFU (verl logs 0.02-0.25 where this reads 0.5).
        f"MFU bound      {_fmt(prediction.get('mfu_bound', prediction['mfu']))}   (roofline at 100% of dense peak; "
        "real runs sit well below)",
        f"MFU estimate   {_fmt(prediction.get('mfu_estimate'))}   (at the estimated step time)",
        f"memory/GPU     {_fmt(prediction['memory_per_gpu_gb'])} GB",
        f"cost/1M tokens {_fmt(prediction['cost_per_mtok_usd'])} USD",
    ]
    return "\n".join(lines + [f"note: {note}" for note in prediction.get("notes", [])])


# Ranked-table columns: (header, key in a ranked row, width). A roofline bound is labelled a bound.
_SWEEP_COLUMNS = (
    ("rank", "rank", 4),
    ("tp", "tp", 3),
    ("pp", "pp", 4),
    ("cp", "cp", 3),
    ("ep", "ep", 3),
    ("sp", "sp", 3),
    ("rollout_tp", "rollout_tp", 10),
    ("placement", "placement", 13),
    ("bound s", "step_time_bound_s", 9),
    ("estimate s", "step_time_estimate_s", 10),
    ("tokens/s bound", "tokens_per_s_bound", 14),
    ("MFU bound", "mfu_bound", 9),
    ("GB/GPU", "memory_per_gpu_gb", 7),
    ("slowest stage", "slowest_stage", 20),
)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.0f}" if value >= 1000 else _fmt(value)
    return "n/a" if value is None else str(value)


def sweep_table(
    ranked: list[dict[str, Any]], skipped: list[dict[str, Any]], notes: tuple[str, ...] | list[str] = (), shown: int = 3
) -> str:
    """The ranked layouts, then the skipped ones: a count per check and the first `shown` of each."""
    lines = [" ".join(f"{head:>{width}}" for head, _, width in _SWEEP_COLUMNS)]
    for row in ranked:
        lines.append(" ".join(f"{_cell(row.get(key)):>{width}}" for _, key, width in _SWEEP_COLUMNS))
    if not ranked:
        lines.append("(no layout fits; see the skipped ones below)")
    by_check: dict[str, list[dict[str, Any]]] = {}
    for item in skipped:
        by_check.setdefault(item["check"], []).append(item)
    largest_first = sorted(by_check.items(), key=lambda kv: -len(kv[1]))
    counts = ", ".join(f"{len(items)} for {check}" for check, items in largest_first)
    lines += ["", f"ranked {len(ranked)} layouts; skipped {len(skipped)}" + (f": {counts}" if counts else "")]
    for check, items in by_check.items():
        for item in items[:shown]:
            lines.append(f"  skipped ({check}) {knob_label(item['layout'], empty='')}: {item['reason']}")
        if len(items) > shown:
            lines.append(f"  ... {len(items) - shown} more for {check} (--json lists every one)")
    lines += [
        "",
        "ranked by estimate s: the bound plus overhead terms, what a run should take; bound s: the roofline "
        "bound at 100% of peak (what the hardware allows, not a measurement, never the ranking); MFU bound: "
        "the roofline's upper bound on MFU, not an estimate of a run's MFU",
    ]
    return "\n".join(lines + [f"note: {note}" for note in notes])
