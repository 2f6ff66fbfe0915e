"""The model against a published measurement: NeMo RL v0.4 GRPO, Llama-3.1-8B-Instruct on 2 DGX-H100.

Source: NVIDIA-NeMo/RL docs/about/performance-summary.md, section "Nemo RL v0.4", table "GRPO.
Dataset: OpenMathInstruct-2; System: DGX-H100; Training BF16, Generation BF16; Megatron-core"
(https://github.com/NVIDIA-NeMo/RL/blob/06beed91bac98a2c39a19435f6bbbbe71aa45720/docs/about/performance-summary.md):

    LLAMA3.1_8B  On policy   T-max 4,096  G-avg 1,060  16 GPUs  G-GBS 2,048  T-GBS 512  gen [TP1,PP1]
                 train PP 2  1,562 tokens/s/GPU  step 97.7 s
    LLAMA3.1_8B  1-step Off  T-max 4,096  G-avg 1,129  16 GPUs  (same)  2,161 tokens/s/GPU  step 74.6 s

Recipes (same repository): examples/configs/recipes/llm/performance/grpo-llama3.1-8b-instruct-2n8g.yaml
(64 prompts x 32 generations, max_new_tokens 4096, Megatron PP 2, activation checkpointing,
train_micro_batch_size 1 with sequence packing of 4096-token micro-batches, distributed optimizer,
colocated vLLM TP 1) on grpo_math_1B.yaml (reference KL penalty 0.01, train_global_batch_size
512 -> 4 optimizer steps) and async-grpo-llama3.1-8b-instruct-2n8g.yaml (one node generates,
one trains, max_trajectory_age_steps 1).

Prompt length is not published. We read "G-Average Seq len" as the mean response length and
derive the prompt from the published throughput, whose numerator is the training tokens of
the batch: 1,562 x 16 x 97.7 / 2,048 = 1,192 tokens per sequence -> 132 prompt tokens (the
async row gives 2,161 x 16 x 74.6 / 2,048 - 1,129 = 130). We use 130.

Claim tested: with achievable=1.0 the prediction is a lower bound, so it must not exceed the
measurement, and a useful roofline is within 10x of a tuned system. (Today it predicts
~38 s and ~29 s: about 2.5x below both measurements.)
"""

from __future__ import annotations

import pytest

from rlbench.harness.perfmodel import ParallelShape, WorkloadShape, predict

PUBLISHED = [  # (label, mean response, layout, measured step seconds)
    ("on-policy colocated", 1060.0, ParallelShape(gpus=16, pp=2, sharding="optimizer"), 97.7),
    (
        "one-step-off disaggregated",
        1129.0,
        ParallelShape(
            gpus=16, pp=2, sharding="optimizer", placement="disaggregated", rollout_gpus=8, async_mode="one-step"
        ),
        74.6,
    ),
]


def _work(mean_response: float) -> WorkloadShape:
    """The published runs' workload (64 prompts x 32, up to 4,096 tokens, KL reference) at their mean response."""
    return WorkloadShape(
        prompts_per_step=64,
        group_size=32,
        prompt_len=130,
        response_len=4096,
        fixed_length=False,
        mean_response_len=mean_response,
        mini_batch_prompts=16,
        gradient_checkpointing=True,
        micro_batch_tokens=4096,
        use_kl_reference=True,
    )


@pytest.mark.parametrize(("label", "mean_response", "layout", "measured"), PUBLISHED, ids=[p[0] for p in PUBLISHED])
def test_nemo_rl_llama8b_grpo_step_time(
    label: str, mean_response: float, layout: ParallelShape, measured: float
) -> None:
    predicted = predict("Llama-3.1-8B-Instruct", _work(mean_response), layout, "H100-SXM")
    assert predicted.step_time_s is not None
    ratio = measured / predicted.step_time_s
    assert 1.0 <= ratio <= 10.0, f"{label}: predicted {predicted.step_time_s:.1f} s vs measured {measured} s"
    assert predicted.memory.fits  # the published run fit in 80 GB


def test_async_gain_direction_matches_publication() -> None:
    """Published: one-step-off is faster (74.6 s vs 97.7 s); the model must agree on the direction."""
    times = []
    for _, mean_response, layout, _ in PUBLISHED:
        times.append(predict("Llama-3.1-8B-Instruct", _work(mean_response), layout, "H100-SXM").step_time_s)
    assert times[1] < times[0]
