"""Decode's KV-cache traffic: what each engine's cache moves per step, and that it adds to the GEMMs."""

from __future__ import annotations

import dataclasses

import pytest

from rlbench.harness.perfmodel import ParallelShape, WorkloadShape, cpu_hardware, get_arch, get_hardware, predict
from rlbench.harness.perfmodel import flops as fl
from rlbench.harness.perfmodel.rollout import kv_traffic_per_cached_token
from rlbench.harness.perfmodel.roofline import Work, build_stage

QWEN = get_arch("Qwen2.5-7B-Instruct")
WORK = WorkloadShape(
    prompts_per_step=8,
    group_size=4,
    prompt_len=256,
    response_len=128,
    use_kl_reference=False,
    recompute_old_logprob=False,
)


def test_paged_reads_once_concat_copies_then_reads() -> None:
    assert kv_traffic_per_cached_token("paged") == 1.0
    assert kv_traffic_per_cached_token("concat") == 3.0  # torch.cat read + write, SDPA read


def test_decode_bytes_follow_the_cache_kind() -> None:
    hw = get_hardware("H100-SXM")
    paged = predict(QWEN, WORK, ParallelShape(gpus=1), hw).stage("generation_decode")
    concat = predict(QWEN, dataclasses.replace(WORK, kv_cache="concat"), ParallelShape(gpus=1), hw)
    kv_reads = WORK.sequences * QWEN.kv_bytes_per_token() * fl.decode_kv_read_tokens(256, 128)
    assert concat.stage("generation_decode").bytes - paged.bytes == pytest.approx(2 * kv_reads)


def test_serial_bytes_add_to_compute_bound_work() -> None:
    cpu = cpu_hardware(peak_flops=1e11, mem_bw=1e10)
    common = dict(hw=cpu, achievable=1.0, gpus=1, flops=1e10, comm=(), depth=0)
    overlapped = build_stage("x", bytes=1e9, critical=Work(flops=1e10, bytes=1e9), **common)
    serial = build_stage("x", bytes=1e9, critical=Work(flops=1e10, bytes=1e9, serial_bytes=1e9), **common)
    assert overlapped.time_s == pytest.approx(0.1)  # 0.1 s of compute hides 0.1 s of memory
    assert serial.time_s == pytest.approx(0.2)  # a separate kernel's bytes do not


def test_memory_bound_decode_is_unchanged_by_the_split() -> None:
    """On a GPU the decode of a 7B model is memory-bound: weights + KV / bandwidth either way."""
    hw = get_hardware("H100-SXM")
    decode = predict(QWEN, WORK, ParallelShape(gpus=1), hw).stage("generation_decode")
    assert decode.bound == "memory"
    assert decode.roofline_s == pytest.approx(decode.memory_time_s)


def test_shape_rejects_an_unknown_cache() -> None:
    with pytest.raises(ValueError, match=r"WorkloadShape\.kv_cache"):
        dataclasses.replace(WORK, kv_cache="ring")
