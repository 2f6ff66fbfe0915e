"""Energy and cost per million tokens, hand-computed."""

from __future__ import annotations

import math

import pytest

from rlbench.harness.telemetry.costs import cost_per_mtok_usd, energy_kwh, energy_per_mtok_j


def test_energy_per_mtok():
    assert energy_per_mtok_j(2.0e7, 5.0e7) == pytest.approx(4.0e5)
    assert math.isnan(energy_per_mtok_j(float("nan"), 1e6))
    assert energy_kwh(3.6e6) == 1.0


def test_cost_per_mtok():
    # 8 GPU-h x $3 = $24; 2e7 J = 5.556 kWh x $0.15 = $0.8333; over 50 M tokens
    assert cost_per_mtok_usd(8.0, 3.0, 2.0e7, 0.15, 5.0e7) == pytest.approx((24 + 2e7 / 3.6e6 * 0.15) / 50)
    # power included in the rental price: energy unused, may be unknown
    assert cost_per_mtok_usd(8.0, 3.0, float("nan"), 0.0, 5.0e7) == pytest.approx(24 / 50)
    # power priced but not measured: no cost rather than a cost without its energy share
    assert math.isnan(cost_per_mtok_usd(8.0, 3.0, float("nan"), 0.15, 5.0e7))


def test_bad_inputs():
    with pytest.raises(ValueError, match="tokens"):
        energy_per_mtok_j(1.0, 0)
    with pytest.raises(ValueError, match="tokens"):
        cost_per_mtok_usd(1.0, 1.0, 1.0, 0.1, 0)
    with pytest.raises(ValueError, match=">= 0"):
        cost_per_mtok_usd(-1.0, 1.0, 1.0, 0.1, 10)
