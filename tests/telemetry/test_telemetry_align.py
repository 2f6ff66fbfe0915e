"""Per-step telemetry on recorded synthetic sample tables, against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from rlbench.harness.telemetry.align import OUTPUT_COLUMNS, energy_from_power, per_step_telemetry

TICKS = np.arange(0, 17) * 0.25  # 0, 0.25, ..., 4.0 s: exact in binary, so window edges are exact


def _gpu_rows(
    host: str, device: int, watts: float, counter: bool = True, offset_j: float = 1.0e6, ticks: np.ndarray = TICKS
) -> list[dict]:
    """A GPU at constant power; its energy counter (when present) rises linearly from offset_j."""
    return [
        {
            "time_unix_s": t,
            "host": host,
            "source": "gpu",
            "device": device,
            "power_w": watts,
            "energy_j": offset_j + watts * t if counter else np.nan,
            "gpu_util_pct": 50.0 + device * 10,
            "mem_used_gb": 10.0 + device,
        }
        for t in ticks
    ]


def _host_rows(host: str, cpu: float, proc_cpu: float, rss_slope: float) -> list[dict]:
    return [
        {
            "time_unix_s": t,
            "host": host,
            "source": "host",
            "device": -1,
            "cpu_util_pct": cpu,
            "proc_cpu_util_pct": proc_cpu,
            "proc_rss_gb": 1.0 + rss_slope * t,
        }
        for t in TICKS
    ]


def _steps(*windows: tuple[float, float]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "step": range(1, len(windows) + 1),
            "step_start_unix_s": [w[0] for w in windows],
            "step_end_unix_s": [w[1] for w in windows],
        }
    )


def test_linear_energy_counter_gives_exact_energy_per_step():
    table = pd.DataFrame(_gpu_rows("a", 0, 200.0) + _gpu_rows("a", 1, 300.0, offset_j=4.2e7))
    result = per_step_telemetry(table, _steps((0.5, 1.5), (1.5, 3.0)))
    assert tuple(result.columns) == OUTPUT_COLUMNS
    # (200 + 300) W x 1 s and x 1.5 s
    assert result["energy_j"].tolist() == pytest.approx([500.0, 750.0])
    assert result["energy_method"].tolist() == ["counter", "counter"]
    assert result["power_mean_w"].tolist() == pytest.approx([500.0, 500.0])
    assert result["gpu_util_mean_pct"].tolist() == pytest.approx([55.0, 55.0])
    assert result["gpu_mem_peak_gb"].tolist() == [11.0, 11.0]
    # ticks 0.5, 0.75, 1.0, 1.25 and 1.5 ... 3.0, for each of two GPUs: the tick at 1.5, on the
    # shared boundary, belongs to the later step
    assert result["samples"].tolist() == [8, 14]


def test_counter_interpolates_between_samples():
    table = pd.DataFrame(_gpu_rows("a", 0, 400.0))
    result = per_step_telemetry(table, _steps((0.1, 0.2), (1.3, 2.9)))
    assert result["energy_j"].tolist() == pytest.approx([40.0, 640.0])
    assert result["samples"].tolist() == [0, 6]  # the first step falls between two ticks
    assert math.isnan(result["power_mean_w"][0])  # no sample inside it, but its energy is defined


def test_power_only_is_integrated_exactly_with_partial_intervals():
    constant = pd.DataFrame(_gpu_rows("a", 0, 250.0, counter=False))
    result = per_step_telemetry(constant, _steps((0.3, 1.3)))
    assert result["energy_j"][0] == pytest.approx(250.0)
    assert result["energy_method"][0] == "power"
    ramp = pd.DataFrame(
        {"time_unix_s": TICKS, "host": "a", "source": "gpu", "device": 0, "power_w": 100.0 * TICKS, "energy_j": np.nan}
    )
    # integral of 100 t from 1.1 to 3.3 = 50 (3.3^2 - 1.1^2) = 484
    assert per_step_telemetry(ramp, _steps((1.1, 3.3)))["energy_j"][0] == pytest.approx(484.0)


def test_energy_from_power_trapezoid():
    assert energy_from_power(np.array([0.0, 1.0, 2.0, 3.0]), np.full(4, 300.0)) == pytest.approx(900.0)
    assert energy_from_power(np.array([0.0, 1.0, 2.0]), np.array([0.0, 100.0, 0.0])) == pytest.approx(100.0)
    # unsorted input and a NaN sample: sorted, NaN dropped (0..2 at 100 W, then 2..4 at 100 W)
    times, power = np.array([4.0, 0.0, 2.0, 3.0]), np.array([100.0, 100.0, 100.0, np.nan])
    assert energy_from_power(times, power) == pytest.approx(400.0)
    assert math.isnan(energy_from_power(np.array([]), np.array([])))


def test_multi_node_energy_is_summed_over_hosts_and_devices():
    table = pd.DataFrame(
        _gpu_rows("node-a", 0, 100.0) + _gpu_rows("node-b", 0, 200.0) + _gpu_rows("node-b", 1, 300.0, counter=False)
    )
    result = per_step_telemetry(table, _steps((1.0, 3.0)))
    assert result["energy_j"][0] == pytest.approx(1200.0)  # (100 + 200 + 300) W x 2 s
    assert result["energy_method"][0] == "mixed"
    assert result["power_mean_w"][0] == pytest.approx(600.0)


def test_host_columns_over_two_hosts():
    table = pd.DataFrame(_host_rows("node-a", 40.0, 150.0, 0.5) + _host_rows("node-b", 80.0, 250.0, 1.0))
    result = per_step_telemetry(table, _steps((1.0, 2.0)))
    assert result["cpu_util_mean_pct"][0] == pytest.approx(60.0)  # mean over hosts
    assert result["proc_cpu_util_mean_pct"][0] == pytest.approx(400.0)  # summed over hosts
    assert result["proc_rss_peak_gb"][0] == pytest.approx(3.0)  # node-b at t = 2: 1 + 1.0 x 2
    assert math.isnan(result["energy_j"][0]) and result["energy_method"][0] == "none"
    assert math.isnan(result["gpu_util_mean_pct"][0])


def test_uncovered_steps_and_counter_resets_give_nan_not_guesses():
    table = pd.DataFrame(_gpu_rows("a", 0, 100.0))
    result = per_step_telemetry(table, _steps((3.5, 4.5), (-1.0, 0.5)))
    assert result["energy_j"].isna().all()  # the samples end at 4.0 s and start at 0.0 s
    reset = table.copy()
    reset.loc[reset["time_unix_s"] >= 2.0, "energy_j"] -= 1.0e6  # driver reload: counter restarts
    result = per_step_telemetry(reset, _steps((0.5, 1.5), (1.5, 2.5)))
    assert result["energy_j"][0] == pytest.approx(100.0)
    assert math.isnan(result["energy_j"][1])


def test_steps_table_is_checked():
    table = pd.DataFrame(_gpu_rows("a", 0, 100.0))
    with pytest.raises(ValueError, match="step_end_unix_s"):
        per_step_telemetry(table, pd.DataFrame({"step": [1], "step_start_unix_s": [0.0]}))
    with pytest.raises(ValueError, match="step 2 starts before the previous step ends"):
        per_step_telemetry(table, _steps((0.0, 2.0), (1.0, 3.0)))
    with pytest.raises(ValueError, match="step 1"):
        per_step_telemetry(table, _steps((2.0, 1.0)))
    # unsorted steps are fine: rows come back in time order
    result = per_step_telemetry(
        table, pd.DataFrame({"step": [2, 1], "step_start_unix_s": [2.0, 0.0], "step_end_unix_s": [3.0, 1.0]})
    )
    assert result["step"].tolist() == [1, 2]


def _on_node(rows: list[dict], node: str | None) -> list[dict]:
    return [{**row, "node": node} for row in rows]


def test_two_ray_nodes_on_one_host_are_two_samplers():
    """A loopback cluster: node0 and node1 share host "box", whose GPUs node0 alone samples; the driver runs there too.

    Host-wide CPU repeats in all three samplers' rows and counts once; each sampler's process tree counts."""
    table = pd.DataFrame(
        _on_node(_gpu_rows("box", 0, 200.0) + _gpu_rows("box", 1, 300.0, offset_j=5.0e6), "node0")
        + _on_node(_host_rows("box", 50.0, 100.0, 0.5), "node0")
        + _on_node(_host_rows("box", 50.0, 300.0, 0.25), "node1")
        + _on_node(_host_rows("box", 50.0, 20.0, 0.0), "driver")
    )
    result = per_step_telemetry(table, _steps((1.0, 2.0)))
    assert result["energy_j"][0] == pytest.approx(500.0)  # (200 + 300) W x 1 s, each GPU once
    assert result["power_mean_w"][0] == pytest.approx(500.0)
    assert result["cpu_util_mean_pct"][0] == pytest.approx(50.0)  # one physical host
    assert result["proc_cpu_util_mean_pct"][0] == pytest.approx(420.0)  # 100 + 300 + 20, summed over samplers
    assert result["proc_rss_peak_gb"][0] == pytest.approx(2.0)  # node0 at t = 2: 1 + 0.5 x 2; not a sum of peaks
    assert result["samples"][0] == 5 * 2 + 5 * 3  # ticks 1.0 ... 2.0 (the end belongs to the step too)


def test_one_gpu_index_on_two_nodes_is_two_gpus_and_hosts_are_averaged_once_each():
    """Two Ray nodes on two hosts, each with its own GPU 0, and rows without a node (null) counted as local."""
    table = pd.DataFrame(
        _on_node(_gpu_rows("a", 0, 100.0) + _host_rows("a", 20.0, 100.0, 0.0), "node0")
        + _on_node(_gpu_rows("b", 0, 300.0) + _host_rows("b", 60.0, 200.0, 1.0), "node1")
        + _on_node(_host_rows("b", 60.0, 50.0, 0.0), "driver")
    )
    result = per_step_telemetry(table, _steps((1.0, 3.0)))
    assert result["energy_j"][0] == pytest.approx(800.0)  # (100 + 300) W x 2 s: device 0 of each node
    assert result["cpu_util_mean_pct"][0] == pytest.approx(40.0)  # (20 + 60) / 2: host b counts once
    assert result["proc_cpu_util_mean_pct"][0] == pytest.approx(350.0)
    assert result["proc_rss_peak_gb"][0] == pytest.approx(4.0)  # node1 at t = 3
    legacy = pd.DataFrame(_on_node(_gpu_rows("a", 0, 100.0), None) + _gpu_rows("a", 1, 100.0))
    assert per_step_telemetry(legacy, _steps((1.0, 3.0)))["energy_j"][0] == pytest.approx(400.0)
