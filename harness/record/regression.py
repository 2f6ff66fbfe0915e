"""Regression detection between two samples of per-step values: pure functions, no I/O.

A candidate regresses on a metric when both hold (asv's rule: a factor and a test):
- the median ratio candidate/baseline is worse than the threshold, in the metric's
  direction (step time up by more than 5%, or tokens/s down by more than 5%), and
- a two-sided Mann-Whitney U test over the post-warm-up steps rejects equal
  distributions at `alpha`.
A bootstrap confidence interval of the median ratio is reported beside it.

A rank test on few samples has a floor: with n and m steps per side and no ties,
the smallest two-sided p it can return is 2 / C(n+m, n), so 3 vs 3 steps can never
reach p < 0.05 (0.1), nor can 2 vs 7 (0.056); 4 vs 4 can (0.029). Such a pair is
"undecidable", never "unchanged": the verdict says how many steps per side are needed.
A change beyond the threshold that the test does not find significant is "inconclusive"
(the steps vary too much to tell), never "unchanged": a 5x slower night printed as
"unchanged" beside its ratio. Two samples of one and the same constant (a reward that is
0 at every step) are "unchanged": nothing varied, so there is nothing to decide.

    compare_samples(base_times, cand_times, direction="lower", threshold=0.05)
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb
from typing import Literal

import numpy as np
from scipy.stats import mannwhitneyu

Verdict = Literal["regressed", "improved", "unchanged", "inconclusive", "undecidable"]


@dataclass(frozen=True, slots=True)
class Comparison:
    ratio: float  # median(candidate) / median(baseline)
    ci_low: float
    ci_high: float
    p_value: float
    verdict: Verdict
    n_base: int = 0  # finite samples per side, after warm-up
    n_cand: int = 0
    median_base: float = float("nan")
    median_cand: float = float("nan")
    needed_per_side: int = 0  # with equal sides, the fewest samples for which the test can reach alpha


def min_p_value(n_base: int, n_cand: int) -> float:
    """The smallest two-sided Mann-Whitney p attainable with these sample sizes (exact, no ties): 2 / C(n+m, n)."""
    if min(n_base, n_cand) < 1:
        return 1.0
    return min(1.0, 2 / comb(n_base + n_cand, n_base))


def samples_needed(alpha: float) -> int:
    """Fewest samples per side (equal sides) with which the two-sided test can reject at `alpha`."""
    n = 1
    while min_p_value(n, n) >= alpha:
        n += 1
    return n


def bootstrap_ratio_ci(
    base: np.ndarray, cand: np.ndarray, *, n_boot: int = 2000, level: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap CI of median(cand)/median(base), resampling each side independently."""
    rng = np.random.default_rng(seed)
    b = np.median(rng.choice(base, size=(n_boot, base.size)), axis=1)
    c = np.median(rng.choice(cand, size=(n_boot, cand.size)), axis=1)
    ratios = c / b
    tail = (1 - level) / 2
    return float(np.quantile(ratios, tail)), float(np.quantile(ratios, 1 - tail))


def compare_samples(
    base, cand, *, direction: Literal["higher", "lower"], threshold: float = 0.05, alpha: float = 0.05, seed: int = 0
) -> Comparison:
    base, cand = np.asarray(base, float), np.asarray(cand, float)
    base, cand = base[np.isfinite(base)], cand[np.isfinite(cand)]
    sizes = {"n_base": int(base.size), "n_cand": int(cand.size), "needed_per_side": samples_needed(alpha)}
    if min(base.size, cand.size) == 0:
        return Comparison(np.nan, np.nan, np.nan, np.nan, "undecidable", **sizes)
    if np.ptp(base) == 0 and np.ptp(cand) == 0 and base[0] == cand[0]:  # no variation at all: nothing to test
        constant = {"median_base": float(base[0]), "median_cand": float(cand[0])}
        return Comparison(1.0, 1.0, 1.0, np.nan, "unchanged", **sizes, **constant)
    if np.median(base) == 0:  # a ratio to zero is no ratio
        return Comparison(np.nan, np.nan, np.nan, np.nan, "undecidable", **sizes)
    medians = {"median_base": float(np.median(base)), "median_cand": float(np.median(cand))}
    ratio = medians["median_cand"] / medians["median_base"]
    low, high = bootstrap_ratio_ci(base, cand, seed=seed)
    if min_p_value(base.size, cand.size) >= alpha:
        # The test cannot reject at any effect size: report the ratio, decide nothing.
        return Comparison(ratio, low, high, np.nan, "undecidable", **sizes, **medians)
    p_value = float(mannwhitneyu(cand, base, alternative="two-sided").pvalue)
    worse = ratio > 1 + threshold if direction == "lower" else ratio < 1 - threshold
    better = ratio < 1 - threshold if direction == "lower" else ratio > 1 + threshold
    significant = p_value < alpha
    verdict: Verdict = (
        ("regressed" if worse else "improved" if better else "unchanged")
        if significant
        else ("inconclusive" if worse or better else "unchanged")
    )
    return Comparison(ratio, low, high, p_value, verdict, **sizes, **medians)
