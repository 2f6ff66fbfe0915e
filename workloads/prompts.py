"""The prompt set of one run: identical problems, text and order for every framework.

rlbench, not the framework, decides which problems a run trains on: it loads the
workload's split, shuffles it with the workload's seed, renders the prompt template,
drops prompts longer than `max_prompt_length` tokens (as verl's
`filter_overlong_prompts` does) and writes exactly `steps x prompts_per_step`
prompts to `prompts.jsonl` in the run folder. Adapters convert that one file into
their framework's format and turn the framework's own shuffling off.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from itertools import islice
from pathlib import Path

from rlbench.harness.atomic import write_bytes
from rlbench.harness.errors import RLBenchError
from rlbench.workloads.datasets import Problem, ProblemSet, load_split
from rlbench.workloads.spec import Workload


@dataclass(frozen=True, slots=True)
class PromptRecord:
    uid: str
    dataset: str
    prompt: str  # the rendered template (frameworks wrap it as a user turn when chat is on)
    ground_truth: str


def render(workload: Workload, problem: Problem) -> PromptRecord:
    text = workload.prompt.template.format(question=problem.question)
    return PromptRecord(uid=problem.uid, dataset=problem.dataset, prompt=text, ground_truth=problem.ground_truth)


def workload_problems(workload: Workload) -> ProblemSet:
    """The workload's split as loaded, in file order, with where it came from (`ProblemSet.identity`)."""
    return load_split(workload.data.dataset, workload.data.split, workload.data.limit)


def shuffled(workload: Workload, problems: ProblemSet, seed: int) -> list[Problem]:
    """The split in the run's order: shuffled by the workload's shuffle seed plus the run's seed."""
    order = list(problems.problems)
    random.Random(workload.data.shuffle_seed + seed).shuffle(order)
    return order


def prompt_length(tokenizer, workload: Workload, text: str) -> int:
    if workload.prompt.chat and getattr(tokenizer, "chat_template", None):
        ids = tokenizer.apply_chat_template(
            [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True
        )
        ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
        return len(ids)
    return len(tokenizer(text)["input_ids"])


# No tokenizer rlbench runs packs more characters than this into one token on text a prompt is made of, so a
# problem longer than max_prompt_length x this can never fit and is dropped before anything tokenizes it (one
# 5 MB question made the tiny model's tokenizer training run for over 15 minutes, deaf to SIGTERM in Rust code).
MAX_CHARS_PER_TOKEN = 32


def could_fit(workload: Workload, problem: Problem) -> bool:
    """False for a problem too long, in characters, for any tokenization to fit max_prompt_length."""
    return len(problem.question) + len(problem.ground_truth) <= workload.max_prompt_length * MAX_CHARS_PER_TOKEN


def select_prompts(workload: Workload, problems: list[Problem], tokenizer) -> list[PromptRecord]:
    """The run's prompts in order: overlong ones dropped, the split cycled if too short."""
    needed = workload.steps * workload.prompts_per_step
    kept = [
        r
        for r in (render(workload, p) for p in problems if could_fit(workload, p))
        if tokenizer is None or prompt_length(tokenizer, workload, r.prompt) <= workload.max_prompt_length
    ]
    if not kept:
        raise RLBenchError(
            f"workload {workload.name}: no prompt fits max_prompt_length={workload.max_prompt_length} "
            "tokens; raise max_prompt_length in the workload file"
        )
    return [kept[i % len(kept)] for i in range(needed)]


# The split held out for evaluation (TargetSpec metric eval_accuracy): never the one a run trains on.
EVAL_SPLIT = "test"
EVAL_PROMPTS_FILE = "eval_prompts.jsonl"  # beside prompts.jsonl in the run folder; adapters convert it alike


def select_eval_prompts(workload: Workload, tokenizer) -> list[PromptRecord]:
    """The held-out problems every framework evaluates on: the first `target.eval_problems` rows of the
    dataset's test split that fit max_prompt_length, in file order (no shuffle: the same set for every run).
    An empty list for a workload whose target does not evaluate."""
    target = workload.target
    if target is None or not target.evaluates:
        return []
    if workload.data.split == EVAL_SPLIT:
        raise RLBenchError(
            f"workload {workload.name}: trains on the {EVAL_SPLIT} split, which eval_accuracy holds out; "
            f"train on another split or set target.metric: reward_mean"
        )
    problems = load_split(workload.data.dataset, EVAL_SPLIT).problems
    fitting = (
        r
        for r in (render(workload, p) for p in problems if could_fit(workload, p))
        if tokenizer is None or prompt_length(tokenizer, workload, r.prompt) <= workload.max_prompt_length
    )
    kept = list(islice(fitting, target.eval_problems))  # tokenizes no more of the split than it keeps
    if len(kept) < target.eval_problems:
        raise RLBenchError(
            f"workload {workload.name}: target.eval_problems={target.eval_problems} but the {EVAL_SPLIT} split of "
            f"{workload.data.dataset} has {len(kept)} problems that fit max_prompt_length; lower eval_problems"
        )
    return kept


def write_prompts(records: list[PromptRecord], path: Path) -> None:
    write_bytes(path, "".join(json.dumps(asdict(record)) + "\n" for record in records).encode())


def read_prompts(path: Path) -> list[PromptRecord]:
    with path.open() as handle:
        return [PromptRecord(**json.loads(line)) for line in handle if line.strip()]
