"""Prepare what every framework gets for a run: the model to load and the prompt set.

Done once by rlbench, before any framework starts, so that all frameworks train
the same model on the same prompts in the same order. A `*-tiny` workload's model
is built here (offline, cached); any other model is passed through by hub id or
path, and its tokenizer is only used to drop overlong prompts.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlbench.errors import RLBenchError
from rlbench.workloads.prompts import PromptRecord, select_prompts, shuffled_problems
from rlbench.workloads.spec import Workload

# The tiny tokenizer is trained on this many problems of the split (question + solution text).
TOKENIZER_CORPUS_PROBLEMS = 2000


@dataclass(frozen=True, slots=True)
class RunInputs:
    model: str  # hub id or local folder, as the framework should load it
    prompts: list[PromptRecord]


def _load_tokenizer(model: str):
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise RLBenchError(
            "transformers is not installed; install a framework extra, e.g. pip install 'rlbench[trl]'"
        ) from None
    try:
        return AutoTokenizer.from_pretrained(model)
    except OSError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise RLBenchError(
            f"cannot load the tokenizer of model '{model}' ({first}); download it first "
            "or point model.name in the workload file at a local folder"
        ) from None


def prepare_inputs(workload: Workload, seed: int) -> RunInputs:
    problems = shuffled_problems(workload, seed)
    if workload.model.tiny is not None:
        from rlbench.workloads.tiny_model import build_tiny_model

        corpus = [p.question + "\n" + p.ground_truth for p in problems[:TOKENIZER_CORPUS_PROBLEMS]]
        corpus += [workload.prompt.template.format(question="")]
        model = str(build_tiny_model(workload.model.tiny, corpus, seed))
    else:
        model = workload.model.name
    tokenizer = _load_tokenizer(model)
    return RunInputs(model=model, prompts=select_prompts(workload, problems, tokenizer))
