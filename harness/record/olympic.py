"""Time to target scored over seeds, the MLPerf Training way, and two configurations compared on it. Pure code.

MLPerf Training runs each benchmark over several seeds (5 for most), drops the fastest and the slowest run
and scores the mean of the rest (the "olympic" mean); a run that never reaches the target counts as the
slowest, so one such run is dropped, and a second one leaves the configuration without a score. The median
is given beside it, with the spread of the kept runs and how many seeds reached the target.

Two configurations (two frameworks on equal work, or one before and after) are compared with a two-sided
Mann-Whitney rank test on their times, where a run that did not reach the target ranks slowest. At small n
a rank test cannot reach significance whatever the data: with 2 runs against 2 the smallest p it can give
is 0.33. The verdict then says so instead of calling the two equal.

    olympic_score([41.0, 38.5, None, 40.2, 39.9])   # {"score": 40.05, "median": 40.2, "reached": 4, "n": 5, ...}
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from scipy import stats

MLPERF_RUNS = 5  # MLPerf Training's required run count for most benchmarks (10 for a few)
ALPHA = 0.05


def _as_times(times: list[float | None]) -> list[float]:
    """Times with a run that did not reach the target as +inf (it ranks slowest)."""
    return [math.inf if t is None or not math.isfinite(t) else float(t) for t in times]


def olympic_score(times: list[float | None]) -> dict[str, Any]:
    """The olympic mean (fastest and slowest dropped), the median, the kept runs' spread and the notes that
    bound what they say; None where a figure does not exist (and the notes say why)."""
    values = sorted(_as_times(times))
    n, reached = len(values), sum(math.isfinite(v) for v in values)
    out: dict[str, Any] = {"n": n, "reached": reached, "score": None, "median": None, "std": None, "notes": []}
    if n and math.isfinite(middle := statistics.median(values)):  # +inf where the middle run(s) did not reach it
        out["median"] = middle
    finite = [v for v in values if math.isfinite(v)]
    if finite:
        out["min"], out["max"] = finite[0], finite[-1]
    if n < 3:
        out["notes"].append(f"n = {n}: the olympic score drops the fastest and the slowest run, so it needs 3 runs")
    else:
        kept = values[1:-1]
        if all(math.isfinite(v) for v in kept):
            out["score"] = statistics.fmean(kept)
            out["std"] = statistics.stdev(kept) if len(kept) > 1 else 0.0
            out["kept"] = len(kept)
        else:
            out["notes"].append(
                f"{n - reached} of {n} runs did not reach the target: only one may, as the dropped slowest run"
            )
    if n < MLPERF_RUNS:
        out["notes"].append(f"n = {n}: MLPerf scores time to train over at least {MLPERF_RUNS} seeds")
    if out["median"] is None and n:
        out["notes"].append("the median run did not reach the target")
    return out


def smallest_p(n_base: int, n_cand: int) -> float:
    """The smallest two-sided p an exact rank test can give at these n: every run of one side faster than
    every run of the other, 2 / C(n_base + n_cand, n_base)."""
    if not n_base or not n_cand:
        return 1.0
    return min(1.0, 2 / math.comb(n_base + n_cand, n_base))


def compare_times(base: list[float | None], cand: list[float | None], alpha: float = ALPHA) -> dict[str, Any]:
    """Candidate against baseline on time to target: medians, their ratio, the rank test and a verdict in
    words that stay within what the test can say ("faster", "slower", "not distinguishable", "undecidable")."""
    a, b = _as_times(base), _as_times(cand)
    out: dict[str, Any] = {
        "n_base": len(a),
        "n_cand": len(b),
        "reached_base": sum(map(math.isfinite, a)),
        "reached_cand": sum(map(math.isfinite, b)),
        "median_base": olympic_score(base)["median"],
        "median_cand": olympic_score(cand)["median"],
        "smallest_p": smallest_p(len(a), len(b)),
    }
    mb, mc = out["median_base"], out["median_cand"]
    out["ratio"] = mc / mb if mb and mc is not None else None
    if out["smallest_p"] > alpha:
        out.update(p_value=None, verdict="undecidable")
        out["why"] = (
            f"at n = {len(a)}/{len(b)} a rank test's smallest p is {out['smallest_p']:.2g} > {alpha}: "
            f"run more seeds (e.g. {MLPERF_RUNS} each)"
        )
        return out
    if not any(map(math.isfinite, a + b)):
        out.update(p_value=None, verdict="undecidable", why="no run of either side reached the target")
        return out
    p = float(stats.mannwhitneyu(a, b, alternative="two-sided", method="exact").pvalue)
    out["p_value"] = p
    if p >= alpha:
        out["verdict"] = "not distinguishable"
    else:
        out["verdict"] = "faster" if statistics.median(b) < statistics.median(a) else "slower"
    return out
