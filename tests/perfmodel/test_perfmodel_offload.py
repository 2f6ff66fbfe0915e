"""CPU offload over the host link (WorkloadShape.ref_offload, .offload; stages.trainer_pass's `host`)."""

from __future__ import annotations

import dataclasses

import pytest

from rlbench.harness.perfmodel import ParallelShape, WorkloadShape, cpu_hardware, get_arch, get_hardware, predict
from rlbench.harness.perfmodel.stages import SWAPPED_ADAM_BYTES, SWAPPED_PARAM_BYTES

QWEN7B = get_arch("Qwen2.5-7B-Instruct")
H100 = get_hardware("H100-SXM")
# 64 x 8 sequences of 512 + 1024 tokens on 8 GPUs, packed 16,384 tokens a micro-batch: 6 per GPU per pass
WORK = WorkloadShape(prompts_per_step=64, group_size=8, prompt_len=512, response_len=1024, micro_batch_tokens=16384)
LAYOUT = ParallelShape(gpus=8)


def stage(shape: WorkloadShape, name: str, hw=H100):
    return predict(QWEN7B, shape, LAYOUT, hw).stage(name)


def test_every_gpu_row_but_one_states_its_host_link():
    assert H100.host_link_bytes_per_s == 63e9  # PCIe Gen5 x16, one direction
    assert get_hardware("A100-80GB").host_link_bytes_per_s == 31.5e9
    assert get_hardware("GB200").host_link_bytes_per_s == 450e9  # NVLink-C2C to the Grace CPU
    assert get_hardware("B200").host_link_bytes_per_s is None  # not in its sources: no term, not a guess


def test_a_streamed_reference_model_copies_its_shard_in_for_every_micro_batch():
    plain, streamed = stage(WORK, "ref_logprob"), stage(dataclasses.replace(WORK, ref_offload=True), "ref_logprob")
    shard = QWEN7B.param_count().total * 2 / 8  # bf16 parameters, FSDP over 8 GPUs
    assert "host_offload" not in plain.comm_bytes
    assert streamed.comm_bytes["host_offload"] == pytest.approx(6 * shard)
    assert "streamed from host memory" in streamed.note
    # only the reference model is offloaded: the old-log-prob pass (the actor) is untouched
    assert stage(dataclasses.replace(WORK, ref_offload=True), "old_logprob") == stage(WORK, "old_logprob")


def test_swapped_models_pay_their_fp32_shard_and_adam_states_in_and_out_around_each_stage():
    offloaded = dataclasses.replace(WORK, offload=True)
    params = QWEN7B.param_count().total / 8
    forward_moved = 2 * params * SWAPPED_PARAM_BYTES
    update_moved = 2 * params * (SWAPPED_PARAM_BYTES + SWAPPED_ADAM_BYTES)
    for name, moved in (("old_logprob", forward_moved), ("actor_update", update_moved)):
        before, after = stage(WORK, name), stage(offloaded, name)
        assert f"({moved / 1e9:.2f} GB/GPU)" in after.note
        # serial to the compute: the bound grows by the transfer at the link's full rate
        assert after.time_s - before.time_s == pytest.approx(moved / H100.host_link_bytes_per_s, rel=1e-6)
    assert stage(offloaded, "ref_logprob") == stage(WORK, "ref_logprob")  # the reference model is not swapped


def test_no_host_link_no_offload_term():
    cpu = cpu_hardware(1e12, 1e11)
    for shape in (dataclasses.replace(WORK, offload=True, ref_offload=True), WORK):
        assert "host memory" not in stage(shape, "ref_logprob", cpu).note
    assert stage(dataclasses.replace(WORK, offload=True), "actor_update", cpu) == stage(WORK, "actor_update", cpu)
