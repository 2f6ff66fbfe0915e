"""Regression detection between two samples of per-step values: pure functions, no I/O.

A candidate regresses on a metric when both hold (asv's rule: a factor and a test):
- the median ratio candidate/baseline is worse than the threshold, in the metric's
  direction (step time up by more than 5%, or tokens/s down by more than 5%), and
- a two-sided Mann-Whitney U test over the post-warm-up steps rejects equal
  distributions at `alpha`.
A bootstrap confidence interval of the median ratio is reported beside it.

    compare_samples(base_times, cand_times, direction="lower", threshold=0.05)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.stats import mannwhitneyu

Verdict = Literal["regressed", "improved", "unchanged", "insufficient"]
MIN_SAMPLES = 3  # below this per side the U test cannot reach p < 0.05 (two-sided)


@dataclass(frozen=True, slots=True)
class Comparison:
    ratio: float  # median(candidate) / median(baseline)
    ci_low: float
    ci_high: float
    p_value: float
    verdict: Verdict


def bootstrap_ratio_ci(base: np.ndarray, cand: np.ndarray, *, n_boot: int = 2000, level: float = 0.95,
                       seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap CI of median(cand)/median(base), resampling each side independently."""
    rng = np.random.default_rng(seed)
    b = np.median(rng.choice(base, size=(n_boot, base.size)), axis=1)
    c = np.median(rng.choice(cand, size=(n_boot, cand.size)), axis=1)
    ratios = c / b
    tail = (1 - level) / 2
    return float(np.quantile(ratios, tail)), float(np.quantile(ratios, 1 - tail))


def compare_samples(base, cand, *, direction: Literal["higher", "lower"], threshold: float = 0.05,
                    alpha: float = 0.05, seed: int = 0) -> Comparison:
    base, cand = np.asarray(base, float), np.asarray(cand, float)
    base, cand = base[np.isfinite(base)], cand[np.isfinite(cand)]
    if min(base.size, cand.size) < MIN_SAMPLES or np.median(base) == 0:
        return Comparison(np.nan, np.nan, np.nan, np.nan, "insufficient")
    ratio = float(np.median(cand) / np.median(base))
    low, high = bootstrap_ratio_ci(base, cand, seed=seed)
    p_value = float(mannwhitneyu(cand, base, alternative="two-sided").pvalue)
    worse = ratio > 1 + threshold if direction == "lower" else ratio < 1 - threshold
    better = ratio < 1 - threshold if direction == "lower" else ratio > 1 + threshold
    significant = p_value < alpha
    verdict: Verdict = "regressed" if worse and significant else "improved" if better and significant else "unchanged"
    return Comparison(ratio, low, high, p_value, verdict)
