"""The adapter registry is lazy and helps with typos; `import rlbench` imports no framework."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rlbench.adapters.base import Adapter
from rlbench.adapters.registry import available, get_adapter
from rlbench.harness.errors import RLBenchError


def test_get_known_adapter():
    adapter = get_adapter("trl")
    assert isinstance(adapter, Adapter) and adapter.name == "trl"
    assert "trl" in available()


def test_typo_suggests_the_nearest_name():
    message = "unknown framework 'trll'; did you mean 'trl'\\? available: openrlhf, trl, verl"
    with pytest.raises(RLBenchError, match=message):
        get_adapter("trll")


def test_import_and_help_import_no_framework():
    code = (
        "import sys, rlbench, rlbench.harness.cli, rlbench.adapters.registry, rlbench.harness.run.runner\n"
        "from click.testing import CliRunner\n"
        "assert CliRunner().invoke(rlbench.harness.cli.main, ['--help']).exit_code == 0\n"
        "heavy = [m for m in ('torch', 'trl', 'transformers', 'verl', 'openrlhf', 'vllm') if m in sys.modules]\n"
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "framework, expected",
    [
        # dynamic bsz at the 16k-token budget; FSDP's reference model streamed from host memory
        ("verl", {"micro_batch_tokens": 16384, "dtype_bytes": 2, "ref_offload": True}),
        # packed samples at the same budget; colocated DeepSpeed sleep swaps fp32 and Adam states around updates
        ("openrlhf", {"micro_batch_tokens": 16384, "update_offload": True}),
    ],
)
def test_each_adapter_states_the_shape_its_launch_fixes(framework, expected):
    import dataclasses

    from rlbench.harness.predict.job_shape import workload_shape
    from rlbench.harness.spec.parallel import Parallelism
    from rlbench.harness.spec.runspec import RunSpec
    from rlbench.workloads.catalog import load_workload

    workload = load_workload("gsm8k-grpo")
    fields = get_adapter(framework).model_shape(RunSpec(framework=framework, workload=workload, parallel=Parallelism()))
    assert fields == expected
    shape = dataclasses.replace(workload_shape(workload), **fields)  # valid WorkloadShape fields
    assert shape.micro_batch_tokens == 16384


def test_verls_cpu_lane_shape_pads_its_training_passes_and_predict_uses_it_on_the_cpu_row_only():
    """The lane trains without use_remove_padding: prompts left-padded to max_prompt_length in training alone."""
    from rlbench.harness.predict.job_shape import launch_shape
    from rlbench.harness.spec.environment import gpus
    from rlbench.workloads.catalog import load_workload

    workload = load_workload("gsm8k-grpo-tiny")
    lane = launch_shape(workload, "verl", (), lane=True)
    assert lane.trainer_padded_prompt_len == workload.max_prompt_length and lane.padded_prompt_len is None
    assert launch_shape(workload, "verl", ()).trainer_padded_prompt_len is None  # a GPU launch packs
    # TRL has no lane: on the CPU row its CPU launch (Hugging Face generate, fp32); on a GPU row its GPU
    # environment's (vLLM, the workload's dtype: bf16 here), whatever this machine has
    trl_cpu = launch_shape(workload, "trl", (), lane=True)
    trl_gpu = launch_shape(load_workload("gsm8k-grpo"), "trl", ())
    if not gpus()[0]:
        assert (trl_cpu.kv_cache, trl_cpu.shared_prefill, trl_cpu.dtype_bytes) == ("concat", False, 4)
        assert trl_cpu.engine_mode == "eager"
    assert (trl_gpu.kv_cache, trl_gpu.shared_prefill, trl_gpu.dtype_bytes) == ("paged", True, 2)
    assert trl_gpu.engine_mode == "cuda_graphs"
    assert launch_shape(workload, "openrlhf", ()).update_offload  # colocated: --ds.enable_sleep
    assert not launch_shape(workload, "openrlhf", (), lane=True).update_offload  # the lane has no sleep mode
    # vLLM's CPU build pages in 128-token blocks, its CUDA build in 16: prefix sharing follows the block
    # and has no CUDA graphs: the lane's engine is eager
    for framework in ("verl", "openrlhf"):
        lane, gpu = launch_shape(workload, framework, (), lane=True), launch_shape(workload, framework, ())
        assert (lane.prefix_block_tokens, lane.engine_mode) == (128, "eager")
        assert (gpu.prefix_block_tokens, gpu.engine_mode) == (16, "cuda_graphs")
        assert lane.engine_max_seqs == gpu.engine_max_seqs  # the equal-work limits stay


def test_a_lane_runs_prediction_records_its_eager_engine_with_the_equal_work_limits():
    """A lane run's prediction.json states the engine the lane ran (eager), beside the contract's sequence limit."""
    from rlbench.adapters.registry import get_adapter
    from rlbench.harness.predict.run_prediction import predict_run
    from rlbench.harness.spec.equal_work import MAX_NUM_SEQS
    from rlbench.harness.spec.parallel import parse_parallel
    from rlbench.harness.spec.runspec import RunSpec
    from rlbench.workloads.catalog import load_workload

    workload = load_workload("gsm8k-grpo-tiny")
    spec = RunSpec(framework="verl", workload=workload, parallel=parse_parallel(()))
    inputs = predict_run(
        workload,
        spec.parallel,
        "Qwen2.5-0.5B-Instruct",
        {"gpus": [{"name": "NVIDIA H100 80GB HBM3"}]},
        prompt_len=90,
        recompute_old_logprob=True,
        shape_fields=get_adapter("verl").launch_shape(spec, lane=True),
    )["inputs"]
    assert inputs["engine_mode"] == "eager" and inputs["engine_max_seqs"] == MAX_NUM_SEQS
