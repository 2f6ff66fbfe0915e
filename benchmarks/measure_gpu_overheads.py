"""Measure the GPU overhead terms of perfmodel/overheads.py on this machine's GPU (a protocol, not a fit).

The constants in overheads.py come from published measurements on other machines. This script
measures the same quantities here, so a GPU session can check them or cite its own:

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


def kernel_launch(torch: Any, n: int = 5000) -> dict[str, float]:
    x = torch.zeros(1, device="cuda")
    for _ in range(100):
        x.add_(1)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        x.add_(1)
    enqueued = time.perf_counter()
    torch.cuda.synchronize()
    done = time.perf_counter()
    return {"host_enqueue_s": (enqueued - start) / n, "end_to_end_s": (done - start) / n}


def _forward_time(torch: Any, layers: int, repeats: int = 200) -> float:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(hidden_size=64, intermediate_size=256, num_hidden_layers=layers, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=1024)
    model = Qwen2ForCausalLM(config).to("cuda", torch.bfloat16).eval()
    ids = torch.ones(1, 1, dtype=torch.long, device="cuda")
    with torch.no_grad():
        for _ in range(10):
            model(ids)
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(repeats):
            model(ids)
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / repeats


def layer_unit(torch: Any) -> dict[str, float]:
    shallow, deep = _forward_time(torch, 2), _forward_time(torch, 8)
    return {"forward_2_layers_s": shallow, "forward_8_layers_s": deep, "per_layer_s": (deep - shallow) / 6}


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
    try:
        import torch
    except ImportError:
        print("error: torch is not installed", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("error: no CUDA device here; run this on a GPU machine", file=sys.stderr)
        return 2
    result: dict[str, Any] = {"device": torch.cuda.get_device_name(0), "kernel_launch": kernel_launch(torch),
                              "layer_unit": layer_unit(torch)}
    if args.vllm_model:
        result["engine_step_floor_s"] = engine_floor(args.vllm_model)
    result["constants"] = {"KERNEL_LAUNCH_S": overheads.KERNEL_LAUNCH_S,
                           "per_layer_unit_s": overheads.KERNELS_PER_LAYER_FORWARD * overheads.KERNEL_LAUNCH_S,
                           "ENGINE_STEP_FLOOR_S": overheads.ENGINE_STEP_FLOOR_S}
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
