"""Measure this machine's GPU: kernel launch, per-layer latency, bf16 matmul rate by shape, HBM copy
bandwidth and Hugging Face generate's decode step time by batch; the counterpart of `cpu_probe`.

The datasheet rows of perfmodel/hardware.py state peaks; this probe measures what eager
PyTorch gets on the device at hand (torch is what the frameworks compute with):
* kernel_launch: host time to enqueue one tiny kernel (an add on a 1-element tensor) and the
  end-to-end time per kernel once the device has run them all (KERNEL_LAUNCH_S of overheads.py);
* layer_unit / op_latency_s: an eager bf16 forward of one token through a Hugging Face Qwen2 at
  hidden 64, at 2 and 8 layers; the slope per layer is the sequential unit of the work-depth
  model (the `op_latency_s` the CPU row takes from cpu_probe);
* bf16_flops_per_s: an 8192^3 bf16 matmul on random data (zeros run faster: less switching power);
* matmul_rates: bf16 FLOP/s of nn.functional.linear, [rows x dim] through a [dim x dim] weight
  stored [out, in] as nn.Linear holds it, over rows (tokens in flight) x dims (hidden sizes);
* mem_bytes_per_s: a device-to-device copy of COPY_BYTES, counting bytes read and written;
* decode_step_s: seconds per generated token of `model.generate` (sampling, KV cache, fixed
  length) on a random bf16 model of Qwen2.5-0.5B-Instruct's shape, by batch: the time of
  DECODE_LONG minus DECODE_SHORT new tokens over their difference, so the prefill cancels.
Device times come from CUDA events around batches of calls, each batch long enough (>= BATCH_MIN_S)
that the events' resolution does not matter. A rate keeps the best batch (a peak: other work only
slows a batch) and the median beside it, with n.

    python -m rlbench.harness.predict.gpu_probe --out gpu_probe.json

Without CUDA it says so in one line and exits 2.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

PROBE_VERSION = 1
SQUARE_N = 8192  # 1.1 TFLOP a product: long enough to time alone, as the reference figure was taken
RATE_ROWS = (16, 64, 256, 1024, 4096, 16384)  # a decode batch up to a training micro-batch's tokens
RATE_DIMS = (896, 1536, 2048, 3584, 5120, 8192)  # Qwen2.5 hidden sizes 0.5B..32B, and 8192
COPY_BYTES = 2**30  # far past the 60 MB L2, so the copy streams from HBM
BATCHES = 7  # timed batches per measurement
BATCH_MIN_S = 0.01
LAUNCH_KERNELS = 5000
UNIT_REPEATS = 200
DECODE_MODEL = "Qwen2.5-0.5B-Instruct"
DECODE_BATCHES = (1, 8, 32, 128)
DECODE_PROMPT = 128  # prompt tokens per sequence
DECODE_SHORT, DECODE_LONG = 8, 40  # new tokens of the two generate calls whose difference is timed
DECODE_REPEATS = 3


def _stats(seconds: list[float]) -> dict[str, float]:
    """best (min), median, max and n of per-call seconds."""
    return {"best_s": min(seconds), "median_s": statistics.median(seconds), "max_s": max(seconds), "n": len(seconds)}


def time_device(torch: Any, fn, batches: int = BATCHES, min_s: float = BATCH_MIN_S) -> dict[str, float]:
    """Per-call device seconds of fn over `batches` batches timed by CUDA events."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    once = max(time.perf_counter() - start, 1e-7)
    calls = max(1, int(min_s / once))
    per_call = []
    for _ in range(batches):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        per_call.append(begin.elapsed_time(end) / 1e3 / calls)
    return _stats(per_call) | {"calls_per_batch": calls}


def kernel_launch(torch: Any, n: int = LAUNCH_KERNELS) -> dict[str, float]:
    """Host enqueue time and end-to-end time per tiny kernel, over n kernels."""
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
    return {"host_enqueue_s": (enqueued - start) / n, "end_to_end_s": (done - start) / n, "n": n}


def unit_model(layers: int) -> Any:
    """A Hugging Face Qwen2 at hidden 64 of this depth, random weights: its layers' arithmetic is negligible, so
    the per-layer slope of its time is the host's and the launches' cost of a layer."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        hidden_size=64,
        intermediate_size=256,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=1024,
    )
    return Qwen2ForCausalLM(config)


def _forward_time(torch: Any, layers: int, repeats: int = UNIT_REPEATS) -> float:
    model = unit_model(layers).to("cuda", torch.bfloat16).eval()
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
    """Per-layer seconds of a one-token eager forward: the slope between 2 and 8 layers."""
    shallow, deep = _forward_time(torch, 2), _forward_time(torch, 8)
    return {
        "forward_2_layers_s": shallow,
        "forward_8_layers_s": deep,
        "per_layer_s": (deep - shallow) / 6,
        "n": UNIT_REPEATS,
    }


def square_matmul(torch: Any, n: int = SQUARE_N) -> dict[str, float]:
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    timing = time_device(torch, lambda: torch.mm(a, b))
    return timing | {
        "shape": n,
        "flop": 2 * n**3,
        "best_flops_per_s": 2 * n**3 / timing["best_s"],
        "median_flops_per_s": 2 * n**3 / timing["median_s"],
    }


def matmul_rates(torch: Any) -> tuple[list[list[float]], list[list[float]]]:
    """([[rows, dim, best FLOP/s]], [[rows, dim, median FLOP/s]]) over RATE_ROWS x RATE_DIMS."""
    best, median = [], []
    for dim in RATE_DIMS:
        w = torch.randn(dim, dim, device="cuda", dtype=torch.bfloat16)  # [out, in], as nn.Linear stores it
        for rows in RATE_ROWS:
            x = torch.randn(rows, dim, device="cuda", dtype=torch.bfloat16)
            timing = time_device(torch, lambda: torch.nn.functional.linear(x, w))
            flop = 2 * rows * dim * dim
            best.append([rows, dim, flop / timing["best_s"]])
            median.append([rows, dim, flop / timing["median_s"]])
    return best, median


def copy_bandwidth(torch: Any, size: int = COPY_BYTES) -> dict[str, float]:
    src = torch.ones(size // 2, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    timing = time_device(torch, lambda: dst.copy_(src))
    # A copy reads and writes every byte: 2x the buffer crosses the memory bus.
    return timing | {
        "bytes_moved": 2 * size,
        "best_bytes_per_s": 2 * size / timing["best_s"],
        "median_bytes_per_s": 2 * size / timing["median_s"],
    }


def decode_model(torch: Any):
    """A random bf16 model of DECODE_MODEL's shape (perfmodel's built-in row), on the GPU."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from rlbench.harness.perfmodel import BUILTIN_ARCHS

    arch = BUILTIN_ARCHS[DECODE_MODEL]
    config = Qwen2Config(
        vocab_size=arch.vocab,
        hidden_size=arch.hidden,
        intermediate_size=arch.ffn,
        num_hidden_layers=arch.layers,
        num_attention_heads=arch.heads,
        num_key_value_heads=arch.kv_heads,
        tie_word_embeddings=arch.tied_embeddings,
        max_position_embeddings=4096,
    )
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = Qwen2ForCausalLM(config).to(torch.bfloat16).eval()
    return model


def decode_steps(torch: Any) -> dict[str, Any]:
    """Seconds per decode step of model.generate by batch: [[batch, median, min, max, n], ...]."""
    model = decode_model(torch)
    vocab = model.config.vocab_size
    rows = []
    for batch in DECODE_BATCHES:
        ids = torch.randint(0, vocab, (batch, DECODE_PROMPT), device="cuda")
        mask = torch.ones_like(ids)

        def generate(new: int) -> float:
            torch.cuda.synchronize()
            start = time.perf_counter()
            with torch.no_grad():
                model.generate(
                    input_ids=ids,
                    attention_mask=mask,
                    max_new_tokens=new,
                    min_new_tokens=new,
                    do_sample=True,
                    temperature=1.0,
                    top_p=1.0,
                    pad_token_id=0,
                    eos_token_id=None,
                )
            torch.cuda.synchronize()
            return time.perf_counter() - start

        generate(DECODE_SHORT)  # warm-up: allocator, cuBLAS handles for this batch's shapes
        per_step = [
            (generate(DECODE_LONG) - generate(DECODE_SHORT)) / (DECODE_LONG - DECODE_SHORT)
            for _ in range(DECODE_REPEATS)
        ]
        rows.append([batch, statistics.median(per_step), min(per_step), max(per_step), len(per_step)])
    params = sum(p.numel() for p in model.parameters())
    return {
        "model": DECODE_MODEL,
        "parameters": params,
        "weight_bytes": 2 * params,
        "prompt_tokens": DECODE_PROMPT,
        "columns": ["batch", "median_s", "min_s", "max_s", "n"],
        "rows": rows,
    }


def device_identity(torch: Any) -> dict[str, Any]:
    """GPU name, driver, and the software the numbers were taken with."""
    from rlbench.harness.spec.environment import gpus, package_version

    found, driver = gpus()
    props = torch.cuda.get_device_properties(0)
    return {
        "gpu_name": found[0]["name"] if found else torch.cuda.get_device_name(0),
        "driver": driver,
        "memory_bytes": props.total_memory,
        "multiprocessors": props.multi_processor_count,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "transformers": package_version("transformers"),
    }


def measure(torch: Any) -> dict[str, Any]:
    square, copy = square_matmul(torch), copy_bandwidth(torch)
    best, median = matmul_rates(torch)
    unit = layer_unit(torch)
    return device_identity(torch) | {
        "probe_version": PROBE_VERSION,
        "bf16_flops_per_s": square["best_flops_per_s"],
        "square_matmul": square,
        "mem_bytes_per_s": copy["best_bytes_per_s"],
        "copy": copy,
        "matmul_rates": best,
        "matmul_rates_median": median,
        "kernel_launch": kernel_launch(torch),
        "layer_unit": unit,
        "op_latency_s": unit["per_layer_s"],
        "decode_step_s": decode_steps(torch),
        "method": f"CUDA events over {BATCHES} batches of >= {BATCH_MIN_S * 1e3:g} ms, best and median: "
        f"torch.mm bf16 {SQUARE_N}^3 on randn; copy_ of {COPY_BYTES // 2**20} MiB bf16 (bytes read + "
        f"written); nn.functional.linear bf16 rows {RATE_ROWS} x dims {RATE_DIMS}; "
        f"{LAUNCH_KERNELS} x add_ on 1 element (perf_counter); one-token forward of a Qwen2 at hidden 64, "
        f"2 and 8 layers, {UNIT_REPEATS} repeats; generate on a random bf16 {DECODE_MODEL}, prompt "
        f"{DECODE_PROMPT}, ({DECODE_LONG} - {DECODE_SHORT}) new tokens, batches {DECODE_BATCHES}, "
        f"{DECODE_REPEATS} repeats",
    }


def cuda_torch() -> tuple[Any, str | None]:
    """(torch, None) when a CUDA device can be probed, else (None, the one-line reason)."""
    try:
        import torch
    except ImportError:
        return None, "torch is not installed; install a CUDA build of torch to probe a GPU"
    if not torch.cuda.is_available():
        return None, (
            "no CUDA device here (torch.cuda.is_available() is False); run the GPU probe on a machine "
            "with an NVIDIA GPU and a CUDA build of torch"
        )
    return torch, None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write the measurements here as JSON")
    args = parser.parse_args(argv)
    torch, why = cuda_torch()
    if torch is None:
        print(f"error: {why}", file=sys.stderr)
        return 2
    text = json.dumps(measure(torch), indent=2)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
