"""Text tables for `rlbench predict`: one prediction's stages, or a ranked sweep."""

from __future__ import annotations

from typing import Any

from rlbench.run.parallel import knob_label


def _fmt(value: float | None, scale: float = 1.0, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value / scale:.{digits}g}"


def stage_table(prediction: dict[str, Any]) -> str:
    lines = [f"{'stage':<20} {'GFLOP':>10} {'GB moved':>9} {'comm GB':>8} {'time s':>9} {'bound':>8} {'estimate s':>10}"]
    for stage in prediction["stages"]:
        comm = sum(stage["comm_bytes"].values()) if stage["comm_bytes"] else 0.0
        lines.append(f"{stage['name']:<20} {_fmt(stage['flops'], 1e9):>10} {_fmt(stage['bytes'], 1e9):>9} "
                     f"{_fmt(comm, 1e9):>8} {_fmt(stage['time_s']):>9} {stage['bound']:>8} "
                     f"{_fmt(stage.get('estimate_s')):>10}")
    brent = prediction["brent"]
    lines += [
        "",
        f"step time      {_fmt(prediction['step_time_s'])} s   (Brent: {_fmt(brent['lower_s'])} .. {_fmt(brent['upper_s'])} s)",
        f"  bound        {_fmt(prediction.get('step_time_bound_s'))} s   (what the hardware allows: roofline at 100% of peak)",
        f"  estimate     {_fmt(prediction.get('step_time_estimate_s'))} s   (bound plus overhead terms: achievable "
        "fraction of peak, kernel launches, engine per-step floor)",
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


def sweep_table(ranked: list[tuple[dict[str, str], dict[str, Any]]], skipped: list[tuple[dict[str, str], str]]) -> str:
    lines = [f"{'rank':<5} {'layout':<40} {'step s':>9} {'est. s':>9} {'tokens/s':>10} {'MFU<=':>6} {'MFU est':>7} "
             f"{'mem GB':>7}"]
    for rank, (layout, pred) in enumerate(ranked, 1):
        text = knob_label(layout, empty="")
        lines.append(f"{rank:<5} {text:<40} {_fmt(pred['step_time_s']):>9} {_fmt(pred.get('step_time_estimate_s')):>9} "
                     f"{_fmt(pred['tokens_per_s'], digits=4):>10} {_fmt(pred.get('mfu_bound', pred['mfu']), digits=2):>6} "
                     f"{_fmt(pred.get('mfu_estimate'), digits=2):>7} {_fmt(pred['memory_per_gpu_gb']):>7}")
    lines += [f"skipped {knob_label(combo, empty='')}: {why}" for combo, why in skipped]
    lines.append("MFU<=: the roofline's bound at 100% of dense peak, not an estimate of a run's MFU; "
                 "est. s / MFU est: the estimate (bound plus overhead terms)")
    return "\n".join(lines)
