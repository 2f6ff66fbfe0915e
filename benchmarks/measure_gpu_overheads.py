"""Measure the GPU overhead terms of perfmodel/overheads.py on this machine's GPU (a protocol, not a fit).

The constants in overheads.py come from published measurements on other machines. This script
measures the same quantities here, so a GPU session can check them or cite its own (kernel
launch and layer unit are rlbench.harness.predict.gpu_probe's measurements, which also feed the measured
GPU row):

* kernel launch: the host's time to enqueue one tiny kernel (torch add on a 1-element tensor),
  and the end-to-end time per kernel once the device has run them all;
* layer unit: an eager forward of one token through a Hugging Face Qwen2 model at hidden 64,
  at two depths; the slope per layer is the per-unit latency the estimate gives a datasheet row
  (overheads.KERNELS_PER_LAYER_FORWARD x KERNEL_LAUNCH_S);
* trainer unit: a Hugging Face Qwen2 at hidden 64 under FSDP (fully_shard per decoder layer, one
  process), gradient checkpointing on, as verl's and OpenRLHF's FSDP trainers run it: one micro-batch
  of 4 x 64 tokens, forward alone and forward + backward, at 2 and 8 layers. The slope per layer is
  one layer unit of a forward and 4 of a checkpointed forward + backward (stages.py's depth); it is
  the measured counterpart of overheads.FITTED.trainer_unit_s on this machine, a lower figure, as one
  process gathers nothing across GPUs;
* engine step floor (only with --vllm-model, a local model folder): vLLM decoding 4 sequences of
  256 tokens (ignore_eos), with CUDA graphs and eager; seconds per decode step.

    python benchmarks/measure_gpu_overheads.py --out overheads.json [--vllm-model /models/Qwen2.5-0.5B-Instruct]

Nothing here runs without CUDA: the script says so and exits 2.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time
from pathlib import Path
from typing import Any

from rlbench.harness.perfmodel import overheads
from rlbench.harness.predict.gpu_probe import cuda_torch, kernel_launch, layer_unit, unit_model


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


def _trainer_times(torch: Any, layers: int, device: str, repeats: int) -> tuple[float, float]:
    """(forward s, forward + backward s) of one micro-batch through an FSDP-wrapped Qwen2 of this depth."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    model = unit_model(layers).to(device)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    mesh = init_device_mesh(device, (1,))
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    ids = torch.ones(4, 64, dtype=torch.long, device=device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def forward() -> None:
        with torch.no_grad():
            model(ids)

    def train() -> None:
        model(ids, labels=ids).loss.backward()
        model.zero_grad(set_to_none=True)

    times = []
    for step in (forward, train):
        model.train(step is train)
        for _ in range(3):
            step()
        sync()
        start = time.perf_counter()
        for _ in range(repeats):
            step()
        sync()
        times.append((time.perf_counter() - start) / repeats)
    return times[0], times[1]


def trainer_unit(torch: Any, device: str = "cuda", repeats: int = 20) -> dict[str, float]:
    """Seconds per layer unit of an FSDP trainer's micro-batch: the per-layer slope between 2 and 8 layers of
    its forward (1 unit a layer) and of its checkpointed forward + backward (4 units a layer)."""
    import torch.distributed as dist

    started = not dist.is_initialized()
    if started:
        with socket.socket() as free:
            free.bind(("127.0.0.1", 0))
            port = free.getsockname()[1]
        backend = "nccl" if device == "cuda" else "gloo"
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        (fwd_2, train_2), (fwd_8, train_8) = (_trainer_times(torch, n, device, repeats) for n in (2, 8))
    finally:
        if started:
            dist.destroy_process_group()
    return {
        "forward_unit_s": (fwd_8 - fwd_2) / 6,
        "train_unit_s": (train_8 - train_2) / 6 / 4,
        "forward_2_8_layers_s": [fwd_2, fwd_8],
        "train_2_8_layers_s": [train_2, train_8],
        "micro_batch_tokens": 4 * 64,
        "n": repeats,
    }


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
        "trainer_unit": trainer_unit(torch),
    }
    if args.vllm_model:
        result["engine_step_floor_s"] = engine_floor(args.vllm_model)
    result["constants"] = {
        "KERNEL_LAUNCH_S": overheads.KERNEL_LAUNCH_S,
        "per_layer_unit_s": overheads.KERNELS_PER_LAYER_FORWARD * overheads.KERNEL_LAUNCH_S,
        "ENGINE_STEP_FLOOR_S": overheads.ENGINE_STEP_FLOOR_S,
        "FITTED.trainer_unit_s": overheads.FITTED.trainer_unit_s,
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
