"""Energy and money per million tokens, from a run's measured energy, GPU-hours and tokens.

Pure arithmetic with the units in the names. Prices are user settings (cloud
prices for one GPU type vary 2-5x between providers), never defaults hidden in here.

    cost = (GPU-hours x $/GPU-hour + kWh x $/kWh) / tokens x 1e6
    kWh  = J / 3.6e6

    python -c "from rlbench.harness.telemetry.costs import cost_per_mtok_usd; \\
        print(cost_per_mtok_usd(gpu_hours=8.0, gpu_hour_usd=3.0, energy_j=2.0e7, kwh_usd=0.15, tokens=5e7))"
"""

from __future__ import annotations

J_PER_KWH = 3.6e6


def _check_tokens(tokens: float) -> None:
    if not tokens > 0:
        raise ValueError(f"tokens must be > 0, got {tokens}")


def energy_kwh(energy_j: float) -> float:
    """Joules -> kilowatt-hours."""
    return energy_j / J_PER_KWH


def energy_per_mtok_j(energy_j: float, tokens: float) -> float:
    """Energy per million tokens, J/Mtok (lower is better). NaN energy (no GPU telemetry) gives NaN."""
    _check_tokens(tokens)
    return energy_j / tokens * 1e6


def cost_per_mtok_usd(gpu_hours: float, gpu_hour_usd: float, energy_j: float, kwh_usd: float, tokens: float) -> float:
    """US dollars per million tokens (lower is better).

    gpu_hours: wall-clock hours x GPUs used. gpu_hour_usd: rental price, $/GPU-hour.
    energy_j: measured energy, J. kwh_usd: electricity, $/kWh; 0 when the rental
    price already includes power, and then energy_j is not used (it may be NaN).
    With kwh_usd > 0 a NaN energy (no GPU telemetry) gives NaN, not a cost without
    its energy share. tokens: tokens processed (the count behind the throughput metric).
    """
    _check_tokens(tokens)
    if gpu_hours < 0 or gpu_hour_usd < 0 or kwh_usd < 0:
        raise ValueError("gpu_hours, gpu_hour_usd and kwh_usd must be >= 0")
    energy_usd = 0.0 if kwh_usd == 0 else energy_kwh(energy_j) * kwh_usd
    return (gpu_hours * gpu_hour_usd + energy_usd) / tokens * 1e6
