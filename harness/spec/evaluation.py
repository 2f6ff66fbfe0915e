"""Held-out evaluation, the same for every framework: what an `eval_accuracy` target's evaluation is.

Each framework evaluates through its own validation hook (verl's val_files/test_freq, OpenRLHF's --eval.*,
TRL's eval_dataset/eval_steps); what they all get is fixed here: the same problems (the first
`eval_problems` of the dataset's test split, workloads.prompts.select_eval_prompts), one sample each,
decoded with the workload's own sampling and response length, scored by rlbench's reward (accuracy =
mean reward). Decoding is the workload's sampling rather than greedy because TRL 1.16's evaluation
generates with its training generation config (do_sample, the training temperature) and has no setting of
its own; one decoding for all three keeps their accuracies comparable. run.json records this under
`target.evaluation`, with the adapter's hook and settings.

    from rlbench.harness.spec.evaluation import evaluation_contract
    evaluation_contract(load_workload("gsm8k-format-grpo-tiny-eval"))
    # {'split': 'test', 'problems': 16, 'every_steps': 5, 'samples_per_problem': 1, ...}
"""

from __future__ import annotations

from typing import Any

from rlbench.workloads.prompts import EVAL_SPLIT
from rlbench.workloads.spec import Workload


def evaluation_contract(workload: Workload) -> dict[str, Any] | None:
    """The evaluation every framework runs for the workload's target; None where the target does not evaluate."""
    target = workload.target
    if target is None or not target.evaluates:
        return None
    return {
        "split": EVAL_SPLIT,
        "problems": target.eval_problems,
        "selection": f"the first {target.eval_problems} problems of the {EVAL_SPLIT} split that fit "
        "max_prompt_length, in file order",
        "every_steps": target.eval_every,
        "before_training": False,
        "samples_per_problem": 1,
        "temperature": workload.sampling.temperature,
        "top_p": workload.sampling.top_p,
        "max_response_length": workload.max_response_length,
        "fixed_length": workload.fixed_length,
        "scorer": f"rlbench reward {workload.reward!r}; accuracy = mean reward over the problems",
    }
