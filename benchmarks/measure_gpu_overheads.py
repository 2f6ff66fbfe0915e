"""Measure the GPU overhead terms of perfmodel/overheads.py on this machine's GPU (a protocol, not a fit).

The constants in overheads.py come from published measurements on other machines. This script
measures the same quantities here, so a GPU session can check them or cite its own (kernel
launch and layer unit are rlbench.predict.gpu_probe's measurements, which also feed the measured
GPU row):

* kernel launch: the host's time to enqueue one tiny kernel (torch add on a 1-element tensor),
  and the end-to-end time per kernel once the device has run them all;
* layer unit: an eager forward of one token through a Hugging Face Qwen2 model at hidden 64,
  at two depths; the slope per layer is the per-unit latency the estimate gives a datasheet row
  (overheads.KERNELS_PER_LAYER_FORWARD x KERNEL_LAUNCH_S);
* engine step floor (only with --vllm-model, a local model folder): vLLM decoding 4 sequences of
  256 tokens (ignore_eos), with CUDA graphs and eager; seconds per decode step.

    python benchmarks/measure_gpu_overheads.py --out overheads.json [--vllm-model /models/Qwen2.5-0.5B-Instruct]

Nothing here runs without CUDA: the script says so and exits 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from rlbench.perfmodel import overheads
from rlbench.predict.gpu_probe import cuda_torch, kernel_launch, layer_unit


def engine_floor(model: str, steps: int = 256) -> dict[str, float]:
    from vllm import LLM, SamplingParams

    out = {}
    for mode, eager in (("cuda_graphs", False), ("eager", True)):
        llm = LLM(model=model, enforce_eager=eager, gpu_memory_utilization=0.3, max_num_seqs=4)
        params = SamplingParams(max_tokens=steps, ignore_eos=True)
        llm.generate(["warm up"] * 4, SamplingParams(max_tokens=8, ignore_eos=True))
        start = time.perf_counter()
        llm.generate(["Count to one thousand:"] * 4, params)
        out[mode] = (time.perf_counter() - start) / steps
        del llm
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write the measurements here as JSON")
    parser.add_argument("--vllm-model", help="a local model folder for the engine step floor (needs vllm)")
    args = parser.parse_args(argv)
    torch, why = cuda_torch()
    if torch is None:
        print(f"error: {why}", file=sys.stderr)
        return 2
    result: dict[str, Any] = {
        "device": torch.cuda.get_device_name(0),
        "kernel_launch": kernel_launch(torch),
        "layer_unit": layer_unit(torch),
    }
    if args.vllm_model:
        result["engine_step_floor_s"] = engine_floor(args.vllm_model)
    result["constants"] = {
        "KERNEL_LAUNCH_S": overheads.KERNEL_LAUNCH_S,
        "per_layer_unit_s": overheads.KERNELS_PER_LAYER_FORWARD * overheads.KERNEL_LAUNCH_S,
        "ENGINE_STEP_FLOOR_S": overheads.ENGINE_STEP_FLOOR_S,
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
