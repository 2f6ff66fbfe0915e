"""Where a step went, beyond stage times: the generation's long tail and the weight sync against its link.

Per run, from its steps (post-warm-up, median ± std with n):
* tail: the mean, the longest and the p90 response (the p90 where rlbench sees each response: TRL's and
  OpenRLHF's), the mean and p90 a tail workload declares (workloads/tail.py), the longest over the mean (a
  synchronous step decodes until its longest response ends, so a ratio well above 1 means most of the batch
  waits on a few samples), and the share stopped at the cap, as the framework logged them (verl and TRL log the
  longest, OpenRLHF's samples hold it); and an estimate of the seconds the step decoded only its tail, after
  its median response had ended: (longest - median) decode steps x the model's time per decode step of this
  run (prediction.json: the decode stage over its steps), the median the step's own p50 where measured, else
  from the log-normal fitted to the step's mean and longest (rlbench.harness.perfmodel.lengths);
* weight sync: GB/s per rollout GPU (the engine's weight shard over the measured sync time) beside the
  bound of the link it crosses (prediction.json: a GPU row's intra-node link; on a CPU, the machine's
  measured memory bandwidth) and the share of that bound reached.

    from rlbench.reports.step_anatomy import anatomy_rows
    headers, rows = anatomy_rows(runs)
"""

from __future__ import annotations

import math

from rlbench.reports.load import RunView
from rlbench.reports.tables import median_spread

HEADERS = [
    "run",
    "response length mean (tokens)",
    "longest response (tokens)",
    "p90 response (tokens)",
    "declared mean / p90 (tokens)",
    "longest / mean",
    "clipped at the cap (share)",
    "decoding the tail, estimated (s)",
    "weight sync (GB/s per rollout GPU) ↑",
    "link bound (GB/s)",
    "share of the bound",
]


def _stats(run: RunView, column: str) -> tuple[float, float, int] | None:
    steps = run.steady_steps
    if steps is None or column not in steps:
        return None
    return median_spread(steps[column])


def _cell(stats: tuple[float, float, int] | None, digits: int = 3) -> str:
    if stats is None:
        return "–"
    median, std, n = stats
    return f"{median:.{digits}g} ± {std:.2g} (n={n})"


def _ratio(run: RunView) -> tuple[float, float, int] | None:
    steps = run.steady_steps
    if steps is None or not {"response_length_max", "response_length_mean"} <= set(steps):
        return None
    return median_spread(steps["response_length_max"] / steps["response_length_mean"])


def _decode_step_s(run: RunView) -> float | None:
    """The model's seconds per decode step for this run: its decode stage (the estimate where there is one)
    over that stage's steps (the estimate's decode_steps, else the prediction's response length)."""
    prediction = run.prediction or {}
    stage = next((s for s in prediction.get("stages") or [] if s.get("name") == "generation_decode"), None)
    if not stage:
        return None
    seconds = stage.get("estimate_s") or stage.get("time_s")
    terms = prediction.get("estimate_terms") or {}
    steps = terms.get("decode_steps") or (prediction.get("inputs") or {}).get("response_len")
    return seconds / steps if seconds and steps else None


def _tail_seconds(run: RunView) -> tuple[float, float, int] | None:
    from rlbench.harness.predict.response_lengths import fit_to_longest

    steps, per_step = run.steady_steps, _decode_step_s(run)
    cap = (run.record.get("workload") or {}).get("max_response_length")
    needed = {"response_length_mean", "response_length_max", "num_responses"}
    if steps is None or per_step is None or not cap or not needed <= set(steps):
        return None
    tails = []
    for _, row in steps.iterrows():
        mean, longest, n = (float(row[c]) for c in ("response_length_mean", "response_length_max", "num_responses"))
        if not all(math.isfinite(v) for v in (mean, longest, n)):
            continue
        measured = float(row.get("response_length_p50", math.nan))
        if math.isfinite(measured):  # the framework's own responses say where the median ended
            median = measured
        else:
            lengths = fit_to_longest(mean, longest, n, int(cap))
            median = min(math.exp(lengths.mu), cap) if lengths is not None else longest
        tails.append(max(0.0, longest - median) * per_step)
    return median_spread(tails)


def _declared(run: RunView) -> str:
    """The distribution a tail workload declares (run.json response_lengths.declared), beside what was generated."""
    declared = (run.record.get("response_lengths") or {}).get("declared")
    if not isinstance(declared, dict) or not {"mean", "p90"} <= set(declared):
        return "–"
    return f"{declared['mean']:.3g} / {declared['p90']}"


def anatomy_rows(runs: list[RunView]) -> tuple[list[str], list[list[str]]]:
    """The report's table: one row per run with any of these figures."""
    rows = []
    for run in runs:
        sync = _stats(run, "weight_sync_gb_per_s")
        bound = (run.prediction or {}).get("weight_sync_bound_gb_per_s")
        share = f"{sync[0] / bound:.1%}" if sync and bound else "–"
        cells = [
            _cell(_stats(run, "response_length_mean")),
            _cell(_stats(run, "response_length_max")),
            _cell(_stats(run, "response_length_p90")),
            _declared(run),
            _cell(_ratio(run)),
            _cell(_stats(run, "response_clipped_fraction"), 2),
            _cell(_tail_seconds(run)),
            _cell(sync),
            f"{bound:.3g}" if bound else "–",
            share,
        ]
        if any(cell != "–" for cell in cells):
            rows.append([run.label, *cells])
    return HEADERS, rows
