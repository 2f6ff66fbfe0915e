"""Matmul FLOP/s by shape: the CPU row's measured grid is interpolated per stage, datasheet rows use the peak."""

from __future__ import annotations

import math

import pytest

from rlbench.harness.perfmodel import ParallelShape, WorkloadShape, cpu_hardware, predict
from rlbench.harness.perfmodel.arch import ModelArch

GRID = ((16, 64, 1e9), (16, 256, 4e9), (1024, 64, 16e9), (1024, 256, 64e9))


def _row(rates=GRID):
    return cpu_hardware(100e9, 20e9, op_latency_s=1e-4, matmul_rates=rates)


def test_grid_points_are_returned_exactly():
    hw = _row()
    for rows, dim, rate in GRID:
        assert hw.matmul_flops_per_s(rows, dim) == pytest.approx(rate)


def test_between_points_it_is_log_log_linear():
    hw = _row()
    # halfway in log(rows) and log(dim): the geometric mean of the four corners
    expected = math.prod(r for _, _, r in GRID) ** 0.25
    assert hw.matmul_flops_per_s(128, 128) == pytest.approx(expected)


def test_outside_the_grid_it_clamps_and_without_a_grid_it_is_the_peak():
    hw = _row()
    assert hw.matmul_flops_per_s(1, 8) == pytest.approx(1e9)
    assert hw.matmul_flops_per_s(1e6, 1e4) == pytest.approx(64e9)
    assert hw.matmul_flops_per_s(None, 64) == hw.bf16_flops
    assert _row(()).matmul_flops_per_s(16, 64) == 100e9


def test_a_partial_grid_is_refused():
    with pytest.raises(ValueError, match="full"):
        _row(GRID[:3])


def test_stages_run_at_their_own_shape():
    arch = ModelArch(name="t", layers=2, hidden=256, heads=4, kv_heads=2, ffn=688, vocab=2048)
    shape = WorkloadShape(
        prompts_per_step=4,
        group_size=4,
        prompt_len=64,
        response_len=32,
        use_kl_reference=False,
        recompute_old_logprob=False,
        shared_prefill=False,
        micro_batch_size=16,
    )
    par = ParallelShape(gpus=1)
    flat = {
        s.name: s
        for s in predict(
            arch, shape, par, _row(((16, 256, 64e9), (1024, 256, 64e9), (16, 64, 64e9), (1024, 64, 64e9)))
        ).stages
    }
    shaped = {s.name: s for s in predict(arch, shape, par, _row()).stages}
    # decode multiplies 16 rows (one token per sequence): the grid's slow small-matmul rate
    assert shaped["generation_decode"].compute_time_s == pytest.approx(
        flat["generation_decode"].compute_time_s * 64e9 / 4e9
    )
    # training multiplies all 16 x 96 tokens at once: at the grid's edge, 64 GFLOP/s, as flat
    assert shaped["actor_update"].compute_time_s == pytest.approx(flat["actor_update"].compute_time_s)


def test_training_stages_use_the_training_grid():
    train = tuple((m, k, r / 2) for m, k, r in GRID)
    hw = cpu_hardware(100e9, 20e9, matmul_rates=GRID, train_matmul_rates=train)
    assert hw.matmul_flops_per_s(16, 64, training=True) == pytest.approx(0.5e9)
    assert hw.matmul_flops_per_s(16, 64) == pytest.approx(1e9)
    arch = ModelArch(name="t", layers=2, hidden=256, heads=4, kv_heads=2, ffn=688, vocab=2048)
    shape = WorkloadShape(prompts_per_step=4, group_size=4, prompt_len=64, response_len=32, micro_batch_size=16)
    both = {s.name: s for s in predict(arch, shape, ParallelShape(gpus=1), hw).stages}
    forward_only = {s.name: s for s in predict(arch, shape, ParallelShape(gpus=1), _row()).stages}
    assert both["actor_update"].compute_time_s == pytest.approx(2 * forward_only["actor_update"].compute_time_s)
    assert both["ref_logprob"].compute_time_s == pytest.approx(forward_only["ref_logprob"].compute_time_s)


def test_decode_streams_weights_that_do_not_fit_in_the_cache():
    streamed = tuple((m, k, r / 4) for m, k, r in GRID)
    arch = ModelArch(name="t", layers=2, hidden=256, heads=4, kv_heads=2, ffn=688, vocab=2048)
    weights = arch.weight_bytes()
    shape = WorkloadShape(prompts_per_step=4, group_size=4, prompt_len=64, response_len=32, micro_batch_size=16)

    def decode(cache_bytes):
        hw = cpu_hardware(100e9, 20e9, matmul_rates=GRID, streamed_matmul_rates=streamed, cache_bytes=cache_bytes)
        assert hw.matmul_flops_per_s(16, 64, weight_bytes=weights) == pytest.approx(
            0.25e9 if cache_bytes and cache_bytes < weights else 1e9
        )
        return {s.name: s for s in predict(arch, shape, ParallelShape(gpus=1), hw).stages}

    cold, hot, unknown = decode(weights / 2), decode(weights * 2), decode(None)
    assert cold["generation_decode"].compute_time_s == pytest.approx(4 * hot["generation_decode"].compute_time_s)
    assert unknown["generation_decode"].compute_time_s == hot["generation_decode"].compute_time_s
    # training re-reads each weight across many rows: never the streamed grid
    assert cold["actor_update"].compute_time_s == hot["actor_update"].compute_time_s


def test_training_probe_counts_its_layer_as_the_model_does(monkeypatch) -> None:
    """The probe's FLOPs for its decoder layer are the model's; torch's own FLOP counter agrees."""
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    from rlbench.harness.predict import cpu_probe

    shape = cpu_probe.train_layer_shape(256)
    assert shape == {"hidden": 256, "heads": 4, "kv_heads": 2, "head_dim": 64, "ffn": 688}
    layer = cpu_probe._decoder_layer(256, 4, 2, 64, 688)
    x = torch.randn(2, 16, 256, requires_grad=True)
    cos, sin, empty = torch.randn(1, 1, 16, 64), torch.randn(1, 1, 16, 64), torch.zeros(2, 2, 0, 64)
    with FlopCounterMode(display=False) as counter:
        layer(x, cos, sin, empty, empty).sum().backward()
    # short sequences: the attention term, where torch counts the full square and the model the causal half, is small
    assert cpu_probe.train_layer_flops(shape, 2, 16) == pytest.approx(counter.get_total_flops(), rel=0.05)
    monkeypatch.setattr(cpu_probe, "RATE_DIMS", (64,))
    monkeypatch.setattr(cpu_probe, "TRAIN_ROWS", (64, 256))
    monkeypatch.setattr(cpu_probe, "RATE_MIN_S", 0.0)
    rates = cpu_probe.measure_train_matmul_rates()
    assert [(rows, dim) for rows, dim, _ in rates] == [(64, 64), (256, 64)] and all(r > 0 for *_, r in rates)


def test_a_probe_measured_on_a_busy_host_is_used_but_never_cached(monkeypatch, tmp_path) -> None:
    """A probe cached while tests ran read this machine 4x slow (matmul) to 1,000x slow (streamed) for good."""
    from rlbench.harness.predict import cpu_probe

    monkeypatch.setenv("RLBENCH_CACHE", str(tmp_path))
    monkeypatch.setattr(cpu_probe, "_UNCACHED", {})
    fake = {"fp32_flops_per_s": 1e9, "mem_bytes_per_s": 1e9}
    measured: list[int] = []
    monkeypatch.setattr(cpu_probe, "measure", lambda: measured.append(1) or dict(fake))
    monkeypatch.setattr(cpu_probe, "host_busy_pct", lambda: 80.0)
    busy = cpu_probe.cpu_peaks()
    assert busy["host_busy_pct"] == 80.0 and not (tmp_path / "cpu_probe.json").exists()
    assert cpu_probe.cpu_peaks() is busy and len(measured) == 1  # measured once per process, not per question
    monkeypatch.setattr(cpu_probe, "host_busy_pct", lambda: 3.0)
    assert cpu_probe.cpu_peaks(refresh=True)["host_busy_pct"] == 3.0 and (tmp_path / "cpu_probe.json").is_file()
    assert cpu_probe.best_flops_per_s({**fake, "matmul_rates": [[16, 64, 5e9]]}) == 5e9  # MFU's peak: the fastest


def test_a_probe_that_other_work_ran_beside_is_used_but_never_cached(monkeypatch, tmp_path) -> None:
    """The host is checked while the probe runs too, not only for 0.3 s before it: other processes' share is the
    host's busy CPU time less the probe's own."""
    import psutil

    from rlbench.harness.predict import cpu_probe

    monkeypatch.setenv("RLBENCH_CACHE", str(tmp_path))
    monkeypatch.setattr(cpu_probe, "_UNCACHED", {})
    monkeypatch.setattr(cpu_probe, "host_busy_pct", lambda: 0.0)  # quiet when it started
    monkeypatch.setattr(cpu_probe, "measure", lambda: {"fp32_flops_per_s": 1e9, "mem_bytes_per_s": 1e9})
    monkeypatch.setattr(psutil, "cpu_count", lambda *args, **kwargs: 2)

    def clock(*readings):
        ticks = iter(readings)  # (host busy CPU s, the probe's own CPU s, wall s)
        monkeypatch.setattr(cpu_probe, "cpu_clock", lambda: next(ticks))

    clock((100.0, 50.0, 0.0), (118.0, 60.0, 10.0))  # 18 busy core-seconds in 10 s of 2 cores, 10 the probe's
    beside = cpu_probe.cpu_peaks()
    assert beside["host_busy_pct"] == pytest.approx(40.0) and not (tmp_path / "cpu_probe.json").exists()
    clock((100.0, 50.0, 0.0), (111.0, 60.0, 10.0))  # 1 core-second of others in 20: 5%
    alone = cpu_probe.cpu_peaks(refresh=True)
    assert alone["host_busy_pct"] == pytest.approx(5.0) and (tmp_path / "cpu_probe.json").is_file()
    clock((100.0, 50.0, 0.0), (100.5, 50.0, 0.5))  # under 1 s the 10 ms ticks say nothing
    assert cpu_probe.others_busy_pct(cpu_probe.cpu_clock()) == 0.0


def test_a_probe_at_a_frameworks_worker_threads_is_measured_at_them_and_cached_apart(monkeypatch, tmp_path) -> None:
    """A CPU lane's Ray workers compute with 1 torch thread (Ray sets an actor's OMP_NUM_THREADS to its num_cpus):
    their probe runs at that count, is cached beside this process's own, and leaves this process's threads as
    they were."""
    import torch

    from rlbench.harness.predict import cpu_probe

    monkeypatch.setenv("RLBENCH_CACHE", str(tmp_path))
    monkeypatch.setattr(cpu_probe, "_UNCACHED", {})
    monkeypatch.setattr(cpu_probe, "host_busy_pct", lambda: 0.0)
    own = torch.get_num_threads()
    monkeypatch.setattr(
        cpu_probe,
        "measure",
        lambda: {"fp32_flops_per_s": 1e9 * torch.get_num_threads(), "mem_bytes_per_s": 1e9, "method": "fake"},
    )
    mine, one = cpu_probe.cpu_peaks(), cpu_probe.cpu_peaks(threads=1)
    assert torch.get_num_threads() == own
    assert (mine["threads"], one["threads"]) == (own, 1) and one["fp32_flops_per_s"] == 1e9
    assert (tmp_path / "cpu_probe.json").is_file() and (tmp_path / "cpu_probe-1-threads.json").is_file()
    assert cpu_probe.cpu_peaks(threads=1) == one  # from its own cache file
    assert "at 1 torch threads" in cpu_probe.cpu_row(threads=1).source


def test_a_cpu_lane_framework_is_priced_at_its_workers_threads(monkeypatch) -> None:
    """On a CPU run of a Ray-lane framework every pass is priced at the row of its workers' threads (its trainer
    and its vLLM engine run in Ray actors), and the prediction names that row; TRL computes in its own launcher
    process at the machine's threads and keeps the machine's row."""
    import torch

    from rlbench.harness.perfmodel import cpu_hardware
    from rlbench.harness.predict import cpu_probe
    from rlbench.harness.predict.run_prediction import predict_run
    from rlbench.harness.spec.parallel import parse_parallel
    from rlbench.workloads.catalog import load_workload

    if torch.get_num_threads() == 1:
        pytest.skip("this process already runs one torch thread")
    rows = {
        None: cpu_hardware(1e11, 1e10, op_latency_s=3e-4, source="the machine's threads"),
        1: cpu_hardware(2e10, 5e9, op_latency_s=3e-4, source="measured on a cpu at 1 torch threads: fake"),
    }
    monkeypatch.setattr(cpu_probe, "cpu_row", lambda threads=None: rows[threads])
    args = (load_workload("gsm8k-grpo-tiny"), parse_parallel(()), "Qwen2.5-0.5B-Instruct", {})
    by = {
        framework: predict_run(*args, prompt_len=90, recompute_old_logprob=True, framework=framework)
        for framework in ("trl", "openrlhf")
    }
    assert by["trl"]["hardware_source"] == "the machine's threads"
    assert "at 1 torch threads" in by["openrlhf"]["hardware_source"]
    stage = {f: {s["name"]: s["time_s"] for s in p["stages"]} for f, p in by.items()}
    for name in ("generation_decode", "old_logprob", "actor_update"):  # a fifth of the peak: every pass slower
        assert stage["openrlhf"][name] > stage["trl"][name], name
