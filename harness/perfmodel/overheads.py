"""GPU overhead terms that turn the roofline bound into an estimate: named constants, each with its source.

The roofline (roofline.py) is a bound: what the datasheet allows. A real step on a GPU also pays
what no datasheet states, and the estimate adds it, stage by stage:

* Achievable fraction of peak (ACHIEVABLE_FRACTION): a large bf16 GEMM on one H200 measured
  ~790 of 989 dense TFLOP/s (0.80) and a device copy ~4.3 of 4.8 TB/s (0.90) (one H200,
  2026-10-28: an 8192^3 matmul, mean of 10 after 3 warm-ups; a device-to-device copy). The estimate
  divides compute, memory and link time by 0.80, the
  smaller of the two: one number, as roofline.py's `achievable` is one number.
* Trainer MFU (TRAINER_MFU): a trainer's forward and backward passes reach at most 47% of the
  dense peak end to end (Megatron-LM's README: "up to 47% Model FLOP Utilization (MFU) on H100
  clusters", GPT models of 2B-462B at sequence length 4096 with its communication overlaps), not a
  lone GEMM's 80%: attention, norms, activations and the loss run between the GEMMs. The estimate
  runs the trainer passes' compute at 0.47 of peak (their memory and links at 0.80). It is the best
  a tuned trainer reports, so the estimate stays on the fast side of a typical run. A fine-grained
  MoE trainer reaches far less (MOE_TRAINER_MFU, 0.237: Megatron-Core's Qwen3-30B-A3B recipe on 32
  H100s in BF16, 234.1 TFLOP/s per GPU): small per-expert GEMMs, token permutation and the router
  run between them. `trainer_mfu(arch)` picks the one for the model.
* Kernel launch latency (KERNEL_LAUNCH_S) x kernels per layer (KERNELS_PER_LAYER_FORWARD): each
  trainer pass is a chain of layer units (roofline.pass_units); however small a micro-batch, a
  unit costs at least its kernels' launches. The estimate gives the datasheet row this per-unit
  latency, so Brent's lower bound max(W/p, D * t) applies on GPU rows too (the host enqueues ahead
  of the device, so launch and arithmetic overlap: roofline.brent's GPU branch).
* Rollout engine per-decode-step floor (ENGINE_STEP_FLOOR_S, by engine mode): a decode step of a
  real engine (scheduler, input preparation, sampler, output processing, and in eager mode one
  host dispatch per kernel) takes milliseconds however small the model. Decode time is then
  max(roofline, steps x floor): the engine never steps faster than its floor.
* Sequences in flight (engine_steps): an engine decodes at most min(max_num_seqs, KV-cache
  capacity / one sequence's KV) sequences at once; a replica with more sequences than that
  generates its tokens in more steps than its longest response: steps = max(longest response,
  tokens of the replica / sequences in flight). The capacity is gpu_memory_utilization x HBM x
  rollout_tp minus the weights, the sequence's KV at prompt + mean response (vLLM's own accounting);
  the limits come from the launch (WorkloadShape.engine_max_seqs, engine_memory_fraction).

* Fitted terms (FittedTerms, FITTED): costs no datasheet or micro-benchmark gives, fitted on the
  declared training subset of benchmarks/published_runs.yaml (`training_subset`) and judged on the
  other runs (`python benchmarks/validate_published.py --fit` prints the fit; a test keeps FITTED
  equal to it):
  - decode_step_s and decode_token_s, by engine mode (as the step floor is): what an engine's decode
    takes beyond the roofline and the step floor, as seconds per decode step of the busiest engine
    (scheduling, the sampler, the step's host-device round trip and the attention kernels' distance
    from the roofline, paid however few sequences are live: depth) and seconds per generated token
    (detokenization and output processing of every live sequence: work). decode time += engine steps x
    decode_step_s + the busiest engine's tokens x decode_token_s. The two are told apart only by subset
    runs of one mode whose tokens per step differ; with one such run the cost goes on tokens.
  - refit_bytes_per_s: the rate at which a colocated engine takes its new weights from the trainer
    (gather, conversion to the engine's layout, CUDA IPC hand-off, the engine's wake-up); the
    colocated weight sync takes at least its weights per GPU / this rate.
  - trainer_unit_s: host seconds per layer unit of a trainer pass.
Every other constant comes from the measurement cited beside it, not from the published runs.

    from rlbench.harness.perfmodel.overheads import estimate_hardware, ENGINE_STEP_FLOOR_S
    hw = estimate_hardware(get_hardware("H100-SXM"))      # op_latency_s = 36 kernels x 4.7 us
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from rlbench.harness.perfmodel.arch import ModelArch
from rlbench.harness.perfmodel.hardware import Hardware
from rlbench.harness.perfmodel.parallel_shape import ParallelShape
from rlbench.harness.perfmodel.rollout import kv_bytes_per_token_per_gpu
from rlbench.harness.perfmodel.roofline import StageCost
from rlbench.harness.perfmodel.shapes import WorkloadShape

# 0.80: min(790/989 GEMM, 4.3/4.8 copy) measured on one H200 (2026-10-28, PyTorch).
ACHIEVABLE_FRACTION = 0.80

# Megatron-LM README, "Performance Benchmarking": "achieving up to 47% Model FLOP Utilization (MFU) on
# H100 clusters" (https://github.com/NVIDIA/Megatron-LM#performance-benchmarking).
TRAINER_MFU = 0.47

# Megatron-LM examples/moe_recipes/README.md (branch dev, e5ad098 and 9c5258f, 2026): Qwen3-30B-A3B, H100 BF16
# baseline (qwen3_30b/h100/bf16_32GPU_TP1PP1EP8.yaml: TP1 PP1 EP8 ETP1, MBS 1, GBS 256, sequence 4096), "Median
# TFLOP/s/GPU" 234.1, counted as Megatron's num_floating_point_operations (6 x tokens x active matmul
# parameters + causal attention), over the 989 TFLOP/s dense peak. Its Qwen3-235B-A22B row (256 H100) is 214.3.
MOE_TRAINER_MFU = 234.1 / 989

# Host cost of one kernel launch through Triton's launcher: 4.7 us on a GB200 (0-argument kernel;
# raw cuLaunchKernel alone 3.0 us), meta-pytorch/tritonbench PR #1017 "Profile inductor launch
# overhead" (https://github.com/meta-pytorch/tritonbench/pull/1017). Eager PyTorch adds ATen
# dispatch on top, so this is a lower figure for an eager trainer.
KERNEL_LAUNCH_S = 4.7e-6

# Kernels of one decoder layer's forward in eager PyTorch, counted from Hugging Face transformers'
# LlamaDecoderLayer / Qwen2DecoderLayer (the modules verl's and OpenRLHF's FSDP trainers run):
# 2 RMSNorms x 6 (to fp32, pow, mean, add eps, rsqrt, mul, weight mul -> ~6 each), q/k/v/o
# projections 4, rotary on q and k 2 x 6 (mul cos, slice, neg, cat, mul sin, add), attention 1,
# 2 residual adds, gate/up/down 3, SiLU 1, gate x up 1: 12 + 4 + 12 + 1 + 2 + 3 + 2 = 36.
KERNELS_PER_LAYER_FORWARD = 36

# Per decode step of the rollout engine at a small batch, seconds, from vLLM PR #51167
# (https://github.com/vllm-project/vllm/pull/51167): single H200, max_num_seqs=4, 209 output
# tokens, mean of 3: eager 3.454 s -> 16.5 ms per step; full CUDA graph 1.093 s -> 5.2 ms per step
# (piecewise CUDA graphs, vLLM's usual mode, 1.150 s -> 5.5 ms). The model is Voxtral-Mini-4B-Realtime-2602,
# a speech-to-text model whose decode steps run its 26-layer text decoder (Ministral-3), a text LLM's
# step. These include that model's own step (about 2 ms of weight reads), so they are the engine's
# floor for a small batch, not a pure overhead: the estimate uses max(roofline, steps x floor).
ENGINE_STEP_FLOOR_S = {"cuda_graphs": 1.093 / 209, "eager": 3.454 / 209}

SOURCES = {
    "ACHIEVABLE_FRACTION": "one H200 measured 788 TF/s on an 8192^3 bf16 matmul (mean of 10 after 3 warm-ups) "
    "and ~4.3 TB/s on a device-to-device copy through PyTorch, 2026-10-28",
    "TRAINER_MFU": "https://github.com/NVIDIA/Megatron-LM (README: up to 47% MFU on H100 clusters)",
    "MOE_TRAINER_MFU": "https://github.com/NVIDIA/Megatron-LM/blob/dev/examples/moe_recipes/README.md "
    "(Qwen3-30B-A3B, 32 H100, BF16 baseline: median 234.1 TFLOP/s/GPU of 989)",
    "KERNEL_LAUNCH_S": "https://github.com/meta-pytorch/tritonbench/pull/1017 "
    "(4.7 us Triton launch, 3.0 us cuLaunchKernel)",
    "KERNELS_PER_LAYER_FORWARD": "counted from transformers' LlamaDecoderLayer in eager mode",
    "ENGINE_STEP_FLOOR_S": "https://github.com/vllm-project/vllm/pull/51167 (H200, Voxtral-Mini-4B-Realtime-2602's "
    "26-layer decoder: eager 3.454 s, full CUDA graph 1.093 s for 209 tokens)",
    "FITTED": "fitted on the training subset of benchmarks/published_runs.yaml "
    "(python benchmarks/validate_published.py --fit); judged on the other runs",
}


@dataclass(frozen=True, slots=True)
class FittedTerms:
    # s per decode step of the busiest engine, by engine mode (a mode left out: no term)
    decode_step_s: dict[str, float] = field(default_factory=dict)
    # s per generated token of the busiest engine, by engine mode (a mode left out: no term)
    decode_token_s: dict[str, float] = field(default_factory=dict)
    refit_bytes_per_s: float = math.inf  # colocated weight-sync rate per GPU (inf: no term)
    trainer_unit_s: float = 0.0  # host s per layer unit of a trainer pass (0: the launch latency alone)
    fitted_on: tuple[str, ...] = ()  # the published runs (benchmarks/published_runs.yaml ids) fitted on


NO_FITTED_TERMS = FittedTerms()
# From `python benchmarks/validate_published.py --fit` on the training subset's three runs: NeMo-RL v0.3's
# Llama-3.1-8B and Llama-3.1-70B Megatron rows (gen 58 and 84 s on CUDA graphs, both 4,096 decode steps with
# 204k and 51k tokens on the busiest engine; refit 5 s on 8 GPUs and 14 s on 64) and verl's Qwen2.5-0.5B PPO run
# on 8 H100 (gen 8.3 s on an eager engine; four trainer passes of 32-64 fixed-size micro-batches per GPU,
# 2.2-13 s). Beyond the roofline and the TP all-reduce latency the two CUDA-graphs rows miss 28.2 and 22.9 s at
# 4x apart in tokens: least squares puts most of it on decode steps (5.15 ms each) and the rest on tokens
# (34.8 us). The eager mode has one run, so its term stays per token; the trainer unit comes from every subset
# run's trainer passes (the 8B's and 70B's are compute-bound).
FITTED = FittedTerms(
    decode_step_s={"cuda_graphs": 5.15e-3},
    decode_token_s={"cuda_graphs": 3.48e-5, "eager": 8.07e-5},
    refit_bytes_per_s=2.87e9,
    trainer_unit_s=1.78e-3,
    fitted_on=(
        "nemo-rl-0.3-llama3.1-8b-megatron",
        "verl-play-qwen2.5-0.5b-8xh100-ppo",
        "nemo-rl-0.3-llama3.1-70b-megatron",
    ),
)


def trainer_mfu(arch: ModelArch) -> float:
    """The fraction of dense peak a tuned trainer's passes reach on this model: MoE or dense."""
    return MOE_TRAINER_MFU if arch.is_moe else TRAINER_MFU


def engine_tokens(shape: WorkloadShape, par: ParallelShape) -> float:
    """Tokens the busiest engine generates in one step: its share of the sequences x the mean response."""
    return math.ceil(shape.sequences / par.rollout_replicas) * shape.mean_response


def engine_cost(stage: StageCost, steps: int, tokens: float, terms: FittedTerms, mode: str) -> StageCost:
    """The decode stage plus the engine's fitted per-step and per-token costs in this engine mode
    (FittedTerms.decode_step_s, decode_token_s)."""
    per_step, per_token = terms.decode_step_s.get(mode, 0.0), terms.decode_token_s.get(mode, 0.0)
    if stage.time_s is None or not (per_step or per_token):
        return stage
    added = [
        f"+ {steps} steps x {per_step * 1e3:.2f} ms" if per_step else "",
        f"+ {tokens:.0f} tokens x {per_token * 1e6:.0f} us" if per_token else "",
    ]
    return dataclasses.replace(
        stage,
        time_s=stage.time_s + steps * per_step + tokens * per_token,
        note=f"{stage.note}; {' '.join(a for a in added if a)} ({mode}, fitted)".lstrip("; "),
    )


def refit_floor(stage: StageCost, arch: ModelArch, par: ParallelShape, terms: FittedTerms) -> StageCost:
    """A colocated weight sync no faster than its weights per GPU at the fitted refit rate."""
    if par.placement != "colocated" or stage.time_s is None or math.isinf(terms.refit_bytes_per_s):
        return stage
    floor = arch.weight_bytes() / par.rollout_tp / terms.refit_bytes_per_s
    if stage.time_s >= floor:
        return stage
    return dataclasses.replace(
        stage,
        time_s=floor,
        bound="refit",
        note=f"{stage.note}; refit at {terms.refit_bytes_per_s / 1e9:.2f} GB/s (fitted)",
    )


def estimate_hardware(hw: Hardware) -> Hardware:
    """The row with a per-layer-unit latency (launches of one layer's kernels) where it has none."""
    if hw.op_latency_s is not None:
        return hw
    return dataclasses.replace(hw, op_latency_s=KERNELS_PER_LAYER_FORWARD * KERNEL_LAUNCH_S)


def trainer_hardware(hw: Hardware, terms: FittedTerms) -> Hardware:
    """The estimate's row for the trainer passes: each layer unit costs at least the trainer's fitted host time
    (FittedTerms.trainer_unit_s), which holds the unit's launches, so the larger of the two is the unit's latency."""
    launch = estimate_hardware(hw)  # always has a per-unit latency: the row's own or the launches'
    if terms.trainer_unit_s <= launch.op_latency_s:
        return launch
    return dataclasses.replace(launch, op_latency_s=terms.trainer_unit_s)


def engine_floor(stage: StageCost, steps: int, mode: str) -> StageCost:
    """The decode stage with time = max(its time, steps x the engine's per-step floor)."""
    if mode not in ENGINE_STEP_FLOOR_S:
        raise ValueError(f"engine mode {mode!r}: must be one of {', '.join(ENGINE_STEP_FLOOR_S)}")
    floor = steps * ENGINE_STEP_FLOOR_S[mode]
    if stage.time_s is None or stage.time_s >= floor:
        return stage
    return dataclasses.replace(
        stage,
        time_s=floor,
        bound="engine",
        note=f"{stage.note}; engine floor {steps} steps x {ENGINE_STEP_FLOOR_S[mode] * 1e3:.1f} ms ({mode})".lstrip(
            "; "
        ),
    )


def in_flight(arch: ModelArch, shape: WorkloadShape, par: ParallelShape, hw: Hardware) -> int:
    """Sequences one engine decodes at once: its share of the batch, capped by its limits."""
    per_replica = math.ceil(shape.sequences / par.rollout_replicas) * par.batches_in_flight
    limit = min(per_replica, shape.engine_max_seqs or per_replica)
    if shape.engine_memory_fraction is None or hw.hbm_bytes is None:
        return limit
    budget = shape.engine_memory_fraction * hw.hbm_bytes * par.rollout_tp - arch.weight_bytes(shape.dtype_bytes)
    per_seq = (
        (shape.computed_prompt_len + shape.mean_response)
        * par.rollout_tp
        * kv_bytes_per_token_per_gpu(arch, par.rollout_tp, shape.dtype_bytes)
    )
    return max(1, min(limit, math.floor(budget / per_seq))) if budget > 0 else 1


def engine_steps(arch: ModelArch, shape: WorkloadShape, par: ParallelShape, hw: Hardware) -> int:
    """Decode steps of the busiest engine per RL step: its decode depth (ParallelShape.decode_depth: the
    longest response over the batches it decodes at once, or the mean with partial rollout), or its
    tokens / sequences in flight where its limits hold fewer sequences than that."""
    per_replica = math.ceil(shape.sequences / par.rollout_replicas)
    by_tokens = math.ceil(per_replica * shape.mean_response / in_flight(arch, shape, par, hw))
    return max(par.decode_depth(shape), by_tokens)
