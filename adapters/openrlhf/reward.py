"""OpenRLHF's reward hook for rlbench: scores OpenRLHF's rollouts with rlbench's shared reward.

OpenRLHF 0.11 loads a Python file given as `--reward.remote_url FILE.py` and calls its
`reward_func(queries, prompts, labels)` once per response (openrlhf/utils/agent.py,
`SingleTurnAgentExecutor`). A query is the decoded prompt plus response (special
tokens kept), a prompt is the text OpenRLHF tokenized, and a label is the
`label` field the OpenRLHF adapter wrote into the training JSONL: a JSON string
`{"dataset": "gsm8k", "ground_truth": "18"}`. Each response is scored exactly as
every other framework scores it, by `rlbench.workloads.rewards.score`.

For `fixed_length` workloads the adapter passes this file as `--train.agent_func_path`
instead: OpenRLHF then asks it for an `AgentExecutor` class, built on first access
(module `__getattr__`, so `reward_func` imports without OpenRLHF), which is
OpenRLHF's own single-turn executor generating with `ignore_eos` and scoring
through `reward_func` here.

    reward_func(["Q: 1+1? A: #### 2<|im_end|>"], ["Q: 1+1? A:"], ['{"dataset": "gsm8k", "ground_truth": "2"}'])
"""

from __future__ import annotations

import copy
import functools
import json
import os
import re
from typing import Any

from rlbench.workloads.rewards import score

# Where the CPU lane asks for every scored response (its evidence that the rewards are rlbench's scores).
REWARD_LOG_ENV = "RLBENCH_OPENRLHF_REWARD_LOG"
# Special-token text the decoded query keeps (OpenRLHF decodes with skip_special_tokens=False);
# verl and TRL score text decoded without them.
_TRAILING_SPECIAL = re.compile(r"(?:\s*(?:<\|[^<>|]*\|>|</s>))+\s*$")


def label(dataset: str, ground_truth: str) -> str:
    """The training row's label: what `reward_func` needs to score one response."""
    return json.dumps({"dataset": dataset, "ground_truth": ground_truth})


def response_text(query: str, prompt: str) -> str:
    """The generated text of `query` (prompt + response, as OpenRLHF decodes it), special tokens dropped."""
    if query.startswith(prompt):
        response = query[len(prompt) :]
    else:  # the prompt's tokens decoded to slightly different text: cut where the two part
        response = query[len(os.path.commonprefix([query, prompt])) :]
    return _TRAILING_SPECIAL.sub("", response)


def reward_func(queries: list[str], prompts: list[str], labels: list[str], **_: Any) -> dict[str, Any]:
    """OpenRLHF's reward-function signature -> rlbench's score in {0.0, 1.0} for each query."""
    import torch  # OpenRLHF expects tensors; it is always installed beside OpenRLHF

    scores, scored = [], []
    for query, prompt, raw in zip(queries, prompts, labels):
        target = json.loads(raw)
        response = response_text(query, prompt)
        scores.append(score(target["dataset"], response, target["ground_truth"]))
        scored.append({"response": response, **target, "score": scores[-1]})
    if os.environ.get(REWARD_LOG_ENV):
        with open(os.environ[REWARD_LOG_ENV], "a") as log:
            log.write("".join(json.dumps(line) + "\n" for line in scored))
    values = torch.tensor(scores, dtype=torch.float32)
    return {"rewards": values, "scores": values, "extra_logs": {}}


@functools.cache
def _fixed_length_executor() -> type:
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    class AgentExecutor(SingleTurnAgentExecutor):
        """OpenRLHF's single-turn rollout with every response generated to max_new_tokens (vLLM ignore_eos)."""

        def __init__(self) -> None:
            super().__init__(__file__)  # a `.py` reward endpoint: OpenRLHF loads `reward_func` from this file

        async def execute(self, prompt, label, sampling_params, *args, **kwargs):
            params = copy.deepcopy(sampling_params)
            params.ignore_eos = True
            return await super().execute(prompt, label, params, *args, **kwargs)

    return AgentExecutor


def __getattr__(name: str) -> Any:
    if name == "AgentExecutor":  # asked for only by OpenRLHF's --train.agent_func_path loader
        return _fixed_length_executor()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
