"""Figures no run can produce are named as data errors (synthetic steps; the limits are the machine's own)."""

from __future__ import annotations

import pandas as pd

from rlbench.harness.record.plausibility import data_errors

HOST = {"environment": {"cpu_count": 2, "memory_gb": 24.0}}


def test_a_possible_record_has_no_data_error():
    steps = pd.DataFrame(
        {"step": [1, 2], "proc_cpu_util_mean_pct": [150.0, 199.0], "proc_pss_peak_gb": [6.0, 7.0], "mfu": [0.2, 0.3]}
    )
    assert data_errors(HOST, steps) == []
    assert data_errors({}, pd.DataFrame()) == []  # nothing known, nothing claimed


def test_cpu_memory_and_mfu_beyond_the_machine_are_named():
    """The audit's figures: 1,300% of one core on 2 cores, memory above the host's, an MFU of 1.24."""
    steps = pd.DataFrame(
        {
            "step": [1, 2, 3],
            "proc_cpu_util_mean_pct": [120.0, 1300.0, 90.0],
            "proc_pss_peak_gb": [5.0, 30.0, 5.0],
            "mfu": [0.5, 1.24, 0.4],
            "time_gen_s": [1.0, -0.5, 1.0],
        }
    )
    assert data_errors(HOST, steps) == [
        "step 2: framework CPU 1300% of one core, above the 2 logical cores' 200%",
        "step 2: framework PSS 30 GB, above the host's 24 GB",
        "step 2: mfu 1.24, above 1 (the device's peak)",
        "time_gen_s: a negative or infinite time",
    ]


def test_a_cluster_run_is_judged_against_all_its_machines():
    """Two Ray nodes on one machine count its cores once; two machines add theirs."""
    nodes = [
        {"label": "node0", "machine": "a/1", "cpu_count": 8, "memory_gb": 64.0},
        {"label": "node1", "machine": "a/1", "cpu_count": 8, "memory_gb": 64.0},
        {"label": "node2", "machine": "b/2", "cpu_count": 8, "memory_gb": 64.0},
    ]
    steps = pd.DataFrame({"step": [1], "proc_cpu_util_mean_pct": [1500.0]})
    assert data_errors({"cluster": {"nodes": nodes}, **HOST}, steps) == []  # 16 cores across two machines
    assert data_errors({"cluster": {"nodes": nodes[:2]}, **HOST}, steps) != []  # one machine of 8


def test_power_above_the_gpus_rating_and_stages_longer_than_their_step_are_named():
    h100 = {"environment": {"cpu_count": 2, "gpus": [{"name": "NVIDIA H100 80GB HBM3"}] * 2}}
    steps = pd.DataFrame(
        {
            "step": [1, 2],
            "power_mean_w": [1200.0, 1700.0],  # two 700 W boards: 1,540 W with the margin
            "step_time_s": [2.0, 2.0],
            "time_gen_s": [1.0, 1.5],
            "time_update_actor_s": [1.0, 1.0],  # step 2: 2.5 s of stages in a 2 s step
        }
    )
    assert data_errors(h100, steps) == [
        "step 2: board power 1700 W, above 2 x 700 W (H100-SXM's TDP)",
        "step 2: its stages add up to 2.5 s, more than its 2 s step",
    ]
    # One-step-off generation overlaps training by design: the sum says nothing there.
    assert data_errors({**h100, "parallel": {"async": "one-step"}}, steps) == [data_errors(h100, steps)[0]]
    assert data_errors(h100, steps.assign(time_gen_s=[1.0, 1.04])) == [data_errors(h100, steps)[0]]  # within 5%
