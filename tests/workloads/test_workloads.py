"""Workload files load into frozen dataclasses; bad values are rejected naming the field."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from rlbench.harness.errors import RLBenchError
from rlbench.workloads.catalog import WORKLOAD_DIR, available_workloads, load_workload

REQUIRED = {"gsm8k-grpo", "math-grpo", "gsm8k-ppo", "math-ppo", "gsm8k-grpo-tiny", "math-grpo-tiny"}


def test_required_workloads_ship_and_load():
    assert REQUIRED <= set(available_workloads())
    for name in available_workloads():
        workload = load_workload(name)
        assert workload.name == name and workload.version >= 1
        assert workload.reward == workload.data.dataset


def test_tiny_workloads_are_cpu_sized_and_gpu_ones_are_real_models():
    for name in ("gsm8k-grpo-tiny", "math-grpo-tiny"):
        w = load_workload(name)
        assert w.model.tiny is not None and w.model.tiny.hidden_size // w.model.tiny.num_heads == 64
    for name in ("gsm8k-grpo", "math-grpo", "gsm8k-ppo", "math-ppo"):
        w = load_workload(name)
        assert w.model.name.startswith("Qwen/Qwen2.5-") and w.fixed_length


def test_workload_is_frozen():
    w = load_workload("gsm8k-grpo-tiny")
    with pytest.raises(dataclasses.FrozenInstanceError):
        w.steps = 10  # type: ignore[misc]


def test_include_merges_nested_keys():
    w = load_workload("math-grpo-tiny")
    assert w.data.dataset == "math" and w.model.name == "tiny" and w.algorithm.group_size == 4
    assert "\\boxed{}" in w.prompt.template.format(question="q")


def _write(tmp_path, mapping, name="custom"):
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(mapping))
    return path


def _base_mapping():
    return yaml.safe_load((WORKLOAD_DIR / "gsm8k-grpo.yaml").read_text()) | {
        "include": str(WORKLOAD_DIR / "_gsm8k.yaml"),
        "name": "custom",
    }


@pytest.mark.parametrize(
    "field_path,value,expected",
    [
        (("algorithm", "group_size"), 1, "algorithm.group_size"),
        (("algorithm", "name"), "dpo", "algorithm.name"),
        (("algorithm", "clip_ratio"), 3, "algorithm.clip_ratio"),
        (("max_response_length",), 0, "max_response_length"),
        (("mini_batch_prompts",), 7, "mini_batch_prompts"),
        (("warmup_steps",), 99, "warmup_steps"),
        (("sampling", "top_p"), 1.5, "sampling.top_p"),
        (("data", "dataset"), "mmlu", "data.dataset"),
        (("prompt", "template"), "no field", "prompt.template"),
        (("model", "dtype"), "int4", "model.dtype"),
        (("fixed_length",), "yes", "fixed_length"),
        (("algorithm", "kl_beta"), 0.1, "algorithm.kl_beta: unknown field"),
        (("target", "value"), 1.5, "target.value"),
        (("target", "metric"), "accuracy", "target.metric"),
        (("target", "eval_every"), 5, "target.eval_every: applies to metric eval_accuracy only"),
        (("target", "window"), 0, "target.window"),
        (("target", "stop"), "no", "target.stop"),
    ],
)
def test_bad_values_name_the_field(tmp_path, field_path, value, expected):
    mapping = _base_mapping() | {"target": {"value": 0.5}}  # a valid target, so each case breaks one field
    target = mapping
    for key in field_path[:-1]:
        target = target.setdefault(key, {})
    target[field_path[-1]] = value
    with pytest.raises(RLBenchError, match=expected.replace(".", r"\.")):
        load_workload(str(_write(tmp_path, mapping)))


def test_missing_field_is_named(tmp_path):
    mapping = _base_mapping()
    del mapping["steps"]
    with pytest.raises(RLBenchError, match="missing required field 'steps'"):
        load_workload(str(_write(tmp_path, mapping)))


def test_malformed_yaml_names_the_line(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("name: broken\nalgorithm: [grpo\nsteps: 3\n")
    with pytest.raises(RLBenchError, match=r"not valid YAML at line \d+"):
        load_workload(str(path))


def test_name_must_match_file(tmp_path):
    mapping = _base_mapping() | {"name": "other"}
    with pytest.raises(RLBenchError, match="must equal the file name"):
        load_workload(str(_write(tmp_path, mapping)))


def test_unknown_workload_suggests_the_nearest():
    with pytest.raises(RLBenchError, match="did you mean 'gsm8k-grpo'"):
        load_workload("gsm8k-grpoo")


def test_with_steps_keeps_warmup_below_steps():
    w = load_workload("gsm8k-grpo").with_steps(2)
    assert w.steps == 2 and w.warmup_steps == 1
    assert w.updates_per_step == w.prompts_per_step // w.mini_batch_prompts


def test_a_problem_too_long_for_any_tokenization_is_dropped_before_a_tokenizer_sees_it():
    """One 5 MB question once hung `run` for 15 minutes in the tokenizer's Rust code; now it costs one len()."""
    from rlbench.workloads.catalog import load_workload
    from rlbench.workloads.datasets import Problem
    from rlbench.workloads.prompts import MAX_CHARS_PER_TOKEN, could_fit, select_prompts

    workload = load_workload("gsm8k-grpo-tiny").with_steps(1)
    huge = Problem("huge", "x" * 5_000_000, "1", "gsm8k")
    short = [Problem(f"p{i}", f"What is {i} + 1?", str(i + 1), "gsm8k") for i in range(workload.prompts_per_step)]
    assert not could_fit(workload, huge) and all(could_fit(workload, p) for p in short)
    limit = workload.max_prompt_length * MAX_CHARS_PER_TOKEN
    assert could_fit(workload, Problem("edge", "y" * (limit - 1), "1", "gsm8k"))

    seen: list[int] = []

    def tokenizer(text: str) -> dict:
        seen.append(len(text))
        return {"input_ids": list(range(len(text) // 4))}

    prompts = select_prompts(workload, [huge, *short], tokenizer)
    assert [p.uid for p in prompts] == [p.uid for p in short] and max(seen) < 1000


def test_the_learnable_workload_has_a_target_and_a_short_format_task():
    from rlbench.workloads.datasets import load_problems
    from rlbench.workloads.rewards import score

    w = load_workload("gsm8k-format-grpo-tiny")
    assert w.target is not None and w.target.metric == "reward_mean" and 0 < w.target.value <= 1
    problems = load_problems(w.data.dataset, w.data.split, limit=50)
    assert len({p.question for p in problems}) == 50 and {p.ground_truth for p in problems} == {"7"}
    assert all(len(p.question) < 50 for p in problems)  # the tokenizer learns digits, not GSM8K's words
    assert score(w.reward, " 7 and 3", "7") == 1.0 and score(w.reward, "no 3 then 7", "7") == 0.0


@pytest.mark.parametrize(
    "target,expected",
    [
        ({"eval_problems": 16}, "target.eval_every: is required with metric eval_accuracy"),
        ({"eval_every": 5}, "target.eval_problems: is required with metric eval_accuracy"),
        ({"eval_every": 5, "eval_problems": 0}, "target.eval_problems"),
        ({"eval_every": 5, "eval_problems": 10_001}, "target.eval_problems: must be at most 10,000"),
        ({"eval_every": 500, "eval_problems": 16}, r"target.eval_every: must be at most steps \(60\)"),
    ],
)
def test_an_eval_accuracy_target_needs_its_evaluation_in_one_line(tmp_path, target, expected):
    mapping = {
        "include": str(WORKLOAD_DIR / "gsm8k-format-grpo-tiny.yaml"),
        "name": "custom",
        "target": {"metric": "eval_accuracy", "value": 0.4, **target},
    }
    with pytest.raises(RLBenchError, match=expected):
        load_workload(str(_write(tmp_path, mapping)))


def test_the_eval_variant_holds_out_the_test_split():
    from rlbench.harness.spec.evaluation import evaluation_contract
    from rlbench.workloads.prompts import select_eval_prompts, select_prompts, shuffled, workload_problems

    w = load_workload("gsm8k-format-grpo-tiny-eval")
    assert w.target.metric == "eval_accuracy" and w.target.evaluates and w.data.split == "train"
    held_out = select_eval_prompts(w, None)
    assert len(held_out) == w.target.eval_problems == 16
    assert [p.uid for p in held_out] == [f"{w.data.dataset}/test/{i}" for i in range(16)]  # the first, in order
    train_uids = {p.uid for p in select_prompts(w, shuffled(w, workload_problems(w), 0), None)}
    assert not train_uids & {p.uid for p in held_out}  # never a training problem
    assert held_out == select_eval_prompts(w, None)  # the same set for every run, in file order
    contract = evaluation_contract(w)
    assert contract["problems"] == 16 and contract["every_steps"] == 5 and contract["samples_per_problem"] == 1
    assert evaluation_contract(load_workload("gsm8k-format-grpo-tiny")) is None
    assert select_eval_prompts(load_workload("gsm8k-format-grpo-tiny"), None) == []


def test_an_eval_target_on_a_workload_that_trains_on_the_test_split_is_refused(tmp_path):
    from rlbench.workloads.prompts import select_eval_prompts

    mapping = {
        "include": str(WORKLOAD_DIR / "math-grpo-tiny.yaml"),
        "name": "custom",
        "target": {"metric": "eval_accuracy", "value": 0.4, "eval_every": 1, "eval_problems": 4},
    }
    workload = load_workload(str(_write(tmp_path, mapping)))
    with pytest.raises(RLBenchError, match="trains on the test split, which eval_accuracy holds out"):
        select_eval_prompts(workload, None)


def test_a_workload_without_a_target_has_none():
    assert load_workload("gsm8k-grpo-tiny").target is None


def test_fewer_steps_than_an_eval_target_evaluates_at_is_one_line():
    with pytest.raises(RLBenchError, match=r"--steps 2: workload gsm8k-format-grpo-tiny-eval: target.eval_every"):
        load_workload("gsm8k-format-grpo-tiny-eval").with_steps(2)
