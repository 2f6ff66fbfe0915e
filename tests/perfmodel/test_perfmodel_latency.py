"""The depth term: sequential units x measured op latency, Brent's bounds, and the CPU probe that measures it."""

from __future__ import annotations

import dataclasses
import json

import pytest

from rlbench.harness.perfmodel import ParallelShape, WorkloadShape, cpu_hardware, get_arch, get_hardware, predict
from rlbench.harness.perfmodel.flops import prefill_flops, sequence_forward_flops
from rlbench.harness.perfmodel.rollout import unshared_prompt_len
from rlbench.harness.perfmodel.roofline import Work, build_stage, pass_units

ARCH = get_arch("Qwen2.5-0.5B-Instruct")  # 24 layers
WORK = WorkloadShape(
    prompts_per_step=4,
    group_size=4,
    prompt_len=64,
    response_len=32,
    use_kl_reference=False,
    recompute_old_logprob=False,
    micro_batch_size=4,
)
CPU = cpu_hardware(peak_flops=1e11, mem_bw=2e10, op_latency_s=1e-3)


def test_depth_counts_layer_units() -> None:
    p = predict(ARCH, WORK, ParallelShape(gpus=1), CPU)
    units = pass_units(24)  # 24 layers + the model's ends + the sampler / loss
    assert units == 26
    assert p.stage("generation_prefill").depth == units
    assert p.stage("generation_decode").depth == 32 * units  # one forward per decode step
    assert p.stage("actor_update").depth == 4 * 3 * units  # 16 sequences / 4 per micro-batch, fwd + 2 bwd
    assert p.stage("generation_decode").depth_time_s == pytest.approx(32 * units * 1e-3)


def test_cpu_adds_latency_gpu_overlaps_it() -> None:
    stage = dict(achievable=1.0, gpus=1, flops=1e9, bytes=0.0, comm=(), depth=100, critical=Work(flops=1e9, bytes=0.0))
    cpu = build_stage("x", hw=CPU, **stage)  # roofline 10 ms, span 100 ms
    assert (cpu.brent_lower_s, cpu.brent_upper_s) == pytest.approx((0.1, 0.11))
    assert cpu.time_s == cpu.brent_upper_s and cpu.bound == "latency"  # eager CPU: dispatch, then compute
    gpu_like = dataclasses.replace(CPU, overlaps_latency=True)
    assert build_stage("x", hw=gpu_like, **stage).time_s == pytest.approx(0.1)  # async launches hide behind work


def test_unknown_latency_is_compute_only() -> None:
    no_latency = cpu_hardware(peak_flops=1e11, mem_bw=2e10)
    p = predict(ARCH, WORK, ParallelShape(gpus=1), no_latency)
    decode = p.stage("generation_decode")
    assert decode.depth_time_s is None and decode.brent_upper_s is None
    assert decode.time_s == decode.brent_lower_s == decode.roofline_s
    assert p.brent_upper_s is None
    assert get_hardware("H100-SXM").op_latency_s is None  # no datasheet states one: never guessed


def test_latency_bounds_small_models_and_scales_with_steps() -> None:
    p16 = predict(ARCH, dataclasses.replace(WORK, response_len=16), ParallelShape(gpus=1), CPU)
    p64 = predict(ARCH, dataclasses.replace(WORK, response_len=64), ParallelShape(gpus=1), CPU)
    d16, d64 = p16.stage("generation_decode"), p64.stage("generation_decode")
    assert d64.depth_time_s == pytest.approx(4 * d16.depth_time_s)
    assert p16.brent_lower_s <= p16.step_time_s <= p16.brent_upper_s
    assert p16.step_time_s == pytest.approx(p16.brent_upper_s)  # every CPU stage adds


def test_shared_prefill_flag() -> None:
    # 64-token prompts in 16-token blocks: each other sample recomputes the last block only
    shared = predict(ARCH, WORK, ParallelShape(gpus=1), CPU).stage("generation_prefill")
    every = predict(ARCH, dataclasses.replace(WORK, shared_prefill=False), ParallelShape(gpus=1), CPU)
    per_prompt = prefill_flops(ARCH, 64)
    tail = sequence_forward_flops(ARCH, 16, start=48, head_positions=1)
    assert shared.flops == pytest.approx(4 * per_prompt + 12 * tail)  # 4 prompts, 3 other samples of each
    assert every.stage("generation_prefill").flops == pytest.approx(16 * per_prompt)  # G = 4 rows per prompt


def test_prefix_sharing_is_by_whole_blocks() -> None:
    # vLLM's cache hit stops at the prompt's last token, and a partial block is never shared
    assert [unshared_prompt_len(w, 16) for w in (1, 15, 16, 17, 512, 520)] == [1, 15, 16, 1, 16, 8]
    assert unshared_prompt_len(95, 128) == 95  # vLLM's CPU block: a short prompt is not shared at all
    cpu_block = dataclasses.replace(WORK, prefix_block_tokens=128)
    shared = predict(ARCH, cpu_block, ParallelShape(gpus=1), CPU).stage("generation_prefill")
    every = predict(ARCH, dataclasses.replace(cpu_block, shared_prefill=False), ParallelShape(gpus=1), CPU)
    assert shared.flops == pytest.approx(every.stage("generation_prefill").flops)
    assert "each other sample prefills 64 of its 64 prompt tokens" in shared.note
    with pytest.raises(ValueError, match=r"WorkloadShape\.prefix_block_tokens"):
        dataclasses.replace(WORK, prefix_block_tokens=0)


def test_hardware_rejects_bad_latency() -> None:
    with pytest.raises(ValueError, match=r"Hardware\.op_latency_s"):
        cpu_hardware(peak_flops=1e11, mem_bw=2e10, op_latency_s=0.0)


def test_probe_measures_a_small_latency() -> None:
    pytest.importorskip("torch")
    from rlbench.harness.predict.cpu_probe import measure_op_latency

    latency = measure_op_latency(repeats=5)
    assert 1e-6 < latency < 0.1  # a tiny layer: microseconds to milliseconds, never seconds


def test_probe_cache_holds_latency_and_builds_the_row(tmp_path, monkeypatch) -> None:
    pytest.importorskip("torch")
    from rlbench.harness.predict import cpu_probe

    monkeypatch.setenv("RLBENCH_CACHE", str(tmp_path))
    fake = {"fp32_flops_per_s": 5e10, "mem_bytes_per_s": 1e10, "op_latency_s": 4e-4, "method": "fake"}
    monkeypatch.setattr(cpu_probe, "measure", lambda: dict(fake))
    monkeypatch.setattr(cpu_probe, "host_busy_pct", lambda: 0.0)  # a busy host's probe is never cached
    peaks = cpu_probe.cpu_peaks()
    assert json.loads((tmp_path / "cpu_probe.json").read_text())["probe_version"] == cpu_probe.PROBE_VERSION
    row = cpu_probe.cpu_row(peaks)
    assert (row.bf16_flops, row.hbm_bytes_per_s, row.op_latency_s, row.overlaps_latency) == (5e10, 1e10, 4e-4, False)
    # a cache from probe version 1 (no latency) is measured again
    old = {**peaks, "probe_version": 1}
    (tmp_path / "cpu_probe.json").write_text(json.dumps(old))
    fake["op_latency_s"] = 5e-4
    assert cpu_probe.cpu_peaks()["op_latency_s"] == 5e-4


def test_probe_reads_the_l2_size_and_builds_the_streamed_row(tmp_path, monkeypatch) -> None:
    from rlbench.harness.predict import cpu_probe

    l2 = cpu_probe.l2_cache_bytes()
    assert l2 is None or 16 * 2**10 <= l2 <= 1 * 2**30  # KiB to MiB, as sysfs states it
    peaks = {
        "fp32_flops_per_s": 5e10,
        "mem_bytes_per_s": 1e10,
        "op_latency_s": 4e-4,
        "method": "fake",
        "cpu_model": "fake",
        "matmul_rates": [[16, 64, 2e9]],
        "streamed_matmul_rates": [[16, 64, 1e9]],
        "cache_bytes": 4 * 2**20,
    }
    row = cpu_probe.cpu_row(peaks)
    assert row.cache_bytes == 4 * 2**20
    assert row.matmul_flops_per_s(16, 64, weight_bytes=8 * 2**20) == pytest.approx(1e9)
    assert row.matmul_flops_per_s(16, 64, weight_bytes=2 * 2**20) == pytest.approx(2e9)
