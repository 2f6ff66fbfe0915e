"""Prepare what every framework gets for a run: the model to load and the prompt set.

Done once by rlbench, before any framework starts, so that all frameworks train
the same model on the same prompts in the same order. A `*-tiny` workload's model
is built here (offline, cached); any other model is passed through by hub id or
path, and its tokenizer is only used to drop overlong prompts. Where the hub cannot be
reached, the tokenizer comes from the local Hugging Face cache only (no minute of retries);
a dry run that cannot find it says so in one line and keeps every prompt.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlbench.harness.errors import RLBenchError
from rlbench.harness.spec.model_arch import hub_cached_file
from rlbench.workloads.datasets import hub_unreachable
from rlbench.workloads.prompts import (
    PromptRecord,
    could_fit,
    select_eval_prompts,
    select_prompts,
    shuffled,
    workload_problems,
)
from rlbench.workloads.spec import Workload

# The tiny tokenizer is trained on this many problems of the split (question + solution text).
TOKENIZER_CORPUS_PROBLEMS = 2000


@dataclass(frozen=True, slots=True)
class RunInputs:
    model: str  # hub id or local folder, as the framework should load it
    prompts: list[PromptRecord]
    # The split's identity (origin, location, revision, sha256), run.json's `data`; None only in a plan
    # built by hand (tests), never in a run.
    data: dict[str, Any] | None = None
    # The held-out problems of an eval_accuracy target (workloads.prompts.select_eval_prompts), else empty.
    eval_prompts: list[PromptRecord] = field(default_factory=list)


def _in_hub_cache(model: str) -> bool:
    """Whether the local Hugging Face cache holds any of a hub model's tokenizer files (no network)."""
    return any(hub_cached_file(model, name) for name in ("tokenizer_config.json", "tokenizer.json"))


def _load_tokenizer(model: str, note: Callable[[str], None] | None = None):
    """The model's tokenizer, from the local Hugging Face cache only where the hub cannot be reached
    (huggingface_hub would retry each file for about a minute). With `note` (a dry run), one that cannot
    be loaded is noted and None returned: the prompts are then not filtered by length."""
    offline = None if Path(model).is_dir() else hub_unreachable()
    if offline and not _in_hub_cache(model):  # known before transformers' seconds of imports
        problem = f"tokenizer {model} not in the local cache and the hub is unreachable ({offline})"
    else:
        try:
            from transformers import AutoTokenizer
        except ImportError:
            raise RLBenchError(
                "transformers is not installed; install a framework extra, e.g. pip install 'rlbench[trl]'"
            ) from None
        try:
            return AutoTokenizer.from_pretrained(model, local_files_only=offline is not None)
        except (OSError, ValueError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            problem = f"cannot load the tokenizer of model '{model}' ({first})"
    if note is not None:
        note(f"prompts not filtered by length: {problem}")
        return None
    raise RLBenchError(f"{problem}; download it first or point model.name in the workload file at a local folder")


def prepare_inputs(workload: Workload, seed: int, *, note: Callable[[str], None] | None = None) -> RunInputs:
    """The run's model and prompts. With `note`, for a plan only (a dry run): what cannot be resolved here is
    said through it, one line each, and left out instead of refused."""
    split = workload_problems(workload)
    problems = [p for p in shuffled(workload, split, seed) if could_fit(workload, p)]  # before any tokenizer
    if not problems:
        raise RLBenchError(
            f"workload {workload.name}: no problem is short enough to fit max_prompt_length="
            f"{workload.max_prompt_length} tokens; raise max_prompt_length in the workload file"
        )
    if workload.model.tiny is not None:
        from rlbench.workloads.tiny_model import build_tiny_model

        corpus = [p.question + "\n" + p.ground_truth for p in problems[:TOKENIZER_CORPUS_PROBLEMS]]
        corpus += [workload.prompt.template.format(question="")]
        model = str(build_tiny_model(workload.model.tiny, corpus, seed))
    else:
        model = workload.model.name
    tokenizer = _load_tokenizer(model, note)
    return RunInputs(
        model=model,
        prompts=select_prompts(workload, problems, tokenizer),
        data=split.identity(),
        eval_prompts=select_eval_prompts(workload, tokenizer),
    )
