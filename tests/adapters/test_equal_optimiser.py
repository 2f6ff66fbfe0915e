"""Every adapter sets the same optimiser (harness.spec.equal_work: AdamW betas, weight decay, gradient clip)
instead of leaving each framework's own default, which differ (verl decays weights by 0.01, OpenRLHF's beta2 is
0.95): on a learnable task these change how fast a framework learns, not only how fast it steps."""

from __future__ import annotations

from pathlib import Path

from rlbench.adapters.openrlhf.config import algorithm_flags
from rlbench.adapters.registry import get_adapter
from rlbench.adapters.verl.config import algorithm_settings
from rlbench.harness.spec.equal_work import ADAM_BETAS, GRAD_CLIP, WEIGHT_DECAY
from rlbench.harness.spec.parallel import Parallelism
from rlbench.harness.spec.runspec import RunSpec
from rlbench.workloads.catalog import load_workload


def _spec(framework: str, workload: str = "gsm8k-format-grpo-tiny") -> RunSpec:
    return RunSpec(framework=framework, workload=load_workload(workload), parallel=Parallelism())


def test_the_three_launches_set_one_optimiser():
    trl = get_adapter("trl").grpo_config(_spec("trl"), Path("."))
    assert (trl["adam_beta1"], trl["adam_beta2"], trl["weight_decay"], trl["max_grad_norm"]) == (
        *ADAM_BETAS,
        WEIGHT_DECAY,
        GRAD_CLIP,
    )
    verl = algorithm_settings(_spec("verl"))
    actor = "actor_rollout_ref.actor.optim"
    assert (tuple(verl[f"{actor}.betas"]), verl[f"{actor}.weight_decay"], verl[f"{actor}.clip_grad"]) == (
        ADAM_BETAS,
        WEIGHT_DECAY,
        GRAD_CLIP,
    )
    openrlhf = algorithm_flags(_spec("openrlhf"))
    assert (tuple(openrlhf["actor.adam.betas"]), openrlhf["actor.adam.weight_decay"], openrlhf["actor.max_norm"]) == (
        ADAM_BETAS,
        WEIGHT_DECAY,
        GRAD_CLIP,
    )
    ppo = algorithm_flags(_spec("openrlhf", "gsm8k-ppo"))
    assert tuple(ppo["critic.adam.betas"]) == ADAM_BETAS and ppo["critic.adam.weight_decay"] == WEIGHT_DECAY


def test_openrlhf_gets_both_betas_as_two_arguments():
    argv = get_adapter("openrlhf").flags(_spec("openrlhf"), "model", Path("/r"))
    at = argv.index("--actor.adam.betas")
    assert argv[at + 1 : at + 3] == [str(b) for b in ADAM_BETAS]
