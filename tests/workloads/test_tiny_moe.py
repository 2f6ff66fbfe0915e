"""The tiny mixture of experts: a router that really routes, its workload, its architecture for the model.

The slow test runs `rlbench run --framework trl --workload gsm8k-grpo-tiny-moe` for 2 steps on CPU.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from rlbench.harness.perfmodel import flops, load_hf_config  # noqa: E402
from rlbench.harness.record.read import read_record  # noqa: E402
from rlbench.harness.spec.model_arch import workload_arch  # noqa: E402
from rlbench.workloads.catalog import load_workload, workload_from_mapping  # noqa: E402
from rlbench.workloads.spec import ModelSpec, TinyModelSpec  # noqa: E402
from rlbench.workloads.tiny_model import build_tiny_model, model_key  # noqa: E402
from tests.conftest import run_cli  # noqa: E402

CORPUS = ["Janet has 16 eggs and eats 3. How many are left? #### 13"] * 50 + [
    f"{i} + {i} = {2 * i}" for i in range(200)
]
SHARED = TinyModelSpec(
    vocab_size=400,
    num_layers=2,
    num_experts=8,
    experts_per_token=2,
    expert_intermediate_size=172,
    shared_expert_intermediate_size=344,
)
ROUTED_ONLY = dataclasses.replace(SHARED, shared_expert_intermediate_size=0)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    cache = tmp_path_factory.mktemp("moe-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RLBENCH_CACHE", str(cache))
        return {
            "shared": build_tiny_model(SHARED, CORPUS, seed=0),
            "routed": build_tiny_model(ROUTED_ONLY, CORPUS, seed=0),
        }


def _model(folder: Path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(folder).eval()


def _routes(model, input_ids):
    """(router probabilities, chosen experts, their weights) of layer 0's router for every token."""
    seen = []
    handle = model.model.layers[0].mlp.gate.register_forward_hook(lambda _m, _i, out: seen.append(out))
    try:
        import torch

        with torch.no_grad():
            logits = model(input_ids=input_ids).logits
    finally:
        handle.remove()
    router_logits, scores, indices = seen[0]
    return router_logits, indices, scores, logits


@pytest.mark.parametrize("which, model_type", [("shared", "qwen2_moe"), ("routed", "qwen3_moe")])
def test_the_router_routes_each_token_to_its_top_k_experts(built, which, model_type):
    import torch

    folder = built[which]
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == model_type and config["num_experts_per_tok"] == 2
    assert config.get("num_experts", config.get("num_local_experts")) == 8  # qwen3_moe writes the latter
    assert config["router_aux_loss_coef"] == 0.0 and config["output_router_logits"] is False  # aux loss off
    model = _model(folder)
    input_ids = torch.tensor([list(range(5, 45))])
    router_logits, indices, scores, _ = _routes(model, input_ids)
    assert router_logits.shape == (40, 8) and indices.shape == (40, 2)
    assert (indices[:, 0] != indices[:, 1]).all()  # two distinct experts per token
    # The choice is the top 2 of the router's own logits, and it differs across tokens.
    assert torch.equal(indices.sort(dim=-1).values, router_logits.topk(2, dim=-1).indices.sort(dim=-1).values)
    assert len({tuple(sorted(row)) for row in indices.tolist()}) > 3
    assert len(set(indices.flatten().tolist())) >= 6  # most experts get some token
    assert torch.allclose(scores.sum(dim=-1), torch.ones(40), atol=1e-5)  # norm_topk_prob


def test_an_expert_matters_exactly_to_the_tokens_routed_to_it(built):
    import torch

    model = _model(built["shared"])
    input_ids = torch.tensor([[7, 300]])  # two tokens choose at most 4 of 8 experts in layer 0
    _, indices, _, before = _routes(model, input_ids)
    chosen = set(indices.flatten().tolist())
    unused, used = min(set(range(8)) - chosen), min(chosen)
    experts = model.model.layers[0].mlp.experts
    with torch.no_grad():
        experts.down_proj[unused].zero_()
        _, _, _, after_unused = _routes(model, input_ids)
        experts.down_proj[used].zero_()
        _, _, _, after_used = _routes(model, input_ids)
    assert torch.equal(before, after_unused)  # an expert no token chose costs nothing and changes nothing
    assert not torch.allclose(before, after_used)


@pytest.mark.parametrize("which, spec", [("shared", SHARED), ("routed", ROUTED_ONLY)])
def test_workload_arch_matches_the_built_config_and_the_weights(built, which, spec):
    folder = built[which]
    arch = workload_arch(ModelSpec(name="tiny", dtype="float32", tiny=spec))
    from_config = load_hf_config(folder)  # what a run's prediction.json is computed from
    same = (
        "layers",
        "hidden",
        "heads",
        "kv_heads",
        "head_dim",
        "tied_embeddings",
        "qkv_bias",
        "moe_experts",
        "moe_top_k",
        "moe_ffn",
        "moe_shared_ffn",
        "moe_shared_gate",
    )
    assert {f: getattr(arch, f) for f in same} == {f: getattr(from_config, f) for f in same}
    weights = sum(p.numel() for p in _model(folder).parameters())
    qk_norms = 0 if spec.shared_expert_intermediate_size else spec.num_layers * 2 * 64  # Qwen3-MoE's, not modelled
    assert from_config.param_count().total + qk_norms == weights


def test_moe_workload_differs_from_the_dense_tiny_one_only_in_its_model():
    moe, dense = load_workload("gsm8k-grpo-tiny-moe"), load_workload("gsm8k-grpo-tiny")
    assert moe.model.tiny.is_moe and not dense.model.tiny.is_moe
    same_model = dataclasses.replace(moe.model, tiny=dense.model.tiny)
    assert (
        dataclasses.replace(
            moe, name=dense.name, description=dense.description, version=dense.version, model=same_model
        )
        == dense
    )
    # Only the MLP differs: the attention, sizes and tokenizer of the dense tiny model are kept.
    assert (
        dataclasses.replace(
            moe.model.tiny,
            num_experts=0,
            experts_per_token=0,
            expert_intermediate_size=0,
            shared_expert_intermediate_size=0,
        )
        == dense.model.tiny
    )


def test_moe_workloads_arch_counts_active_experts_only():
    workload = load_workload("gsm8k-grpo-tiny-moe")
    tiny = workload.model.tiny
    arch = workload_arch(workload.model)
    assert (arch.moe_experts, arch.moe_top_k, arch.moe_ffn, arch.moe_shared_ffn, arch.moe_shared_gate) == (
        tiny.num_experts,
        tiny.experts_per_token,
        tiny.expert_intermediate_size,
        tiny.shared_expert_intermediate_size,
        True,
    )
    count = arch.param_count()
    h, layers = arch.hidden, arch.layers
    idle = layers * (tiny.num_experts - tiny.experts_per_token) * 3 * h * tiny.expert_intermediate_size
    assert count.total - count.active == idle > 0
    # Per token, the MoE's FLOPs are a dense model's whose MLP is as wide as the active experts,
    # plus the router (hidden x experts) and the shared expert's gate (hidden x 1) in every layer.
    width = tiny.experts_per_token * tiny.expert_intermediate_size + tiny.shared_expert_intermediate_size
    dense_equal = dataclasses.replace(
        arch, ffn=width, moe_experts=0, moe_top_k=0, moe_ffn=None, moe_shared_ffn=0, moe_shared_gate=False
    )
    extra = flops.forward_flops_per_token(arch, 100) - flops.forward_flops_per_token(dense_equal, 100)
    assert extra == 2 * layers * (tiny.num_experts + 1) * h
    dense = workload_arch(load_workload("gsm8k-grpo-tiny").model).param_count()
    assert dense.active == dense.total and not workload_arch(load_workload("gsm8k-grpo-tiny").model).is_moe


def test_dense_cache_keys_are_unchanged_and_moe_keys_differ():
    # Keys computed before the MoE fields existed: the dense tiny models already cached stay valid.
    assert model_key(TinyModelSpec(), 0, CORPUS) == "613b5adb7f6a50d4"
    assert model_key(TinyModelSpec(vocab_size=400, num_layers=2), 1, CORPUS) == "a3f35441314f66ce"
    keys = {
        model_key(spec, 0, CORPUS)
        for spec in (
            TinyModelSpec(vocab_size=400, num_layers=2),
            SHARED,
            ROUTED_ONLY,
            dataclasses.replace(SHARED, experts_per_token=3),
        )
    }
    assert len(keys) == 4


@pytest.mark.parametrize(
    "fields, named",
    [
        ({"num_experts": 4, "experts_per_token": 5, "expert_intermediate_size": 64}, "model.tiny.experts_per_token"),
        ({"num_experts": 4, "experts_per_token": 0, "expert_intermediate_size": 64}, "model.tiny.experts_per_token"),
        ({"num_experts": 4, "experts_per_token": 2}, "model.tiny.expert_intermediate_size"),
        ({"experts_per_token": 2}, "model.tiny.experts_per_token"),
        ({"shared_expert_intermediate_size": 64}, "model.tiny.shared_expert_intermediate_size"),
        ({"num_experts": -1}, "model.tiny.num_experts"),
        ({"num_experts": True, "experts_per_token": 1, "expert_intermediate_size": 64}, "model.tiny.num_experts"),
    ],
)
def test_bad_moe_fields_are_refused_by_name(fields, named):
    from rlbench.workloads.catalog import _read_mapping, resolve_path

    values = _read_mapping(resolve_path("gsm8k-grpo-tiny"))
    values["model"]["tiny"] = {**values["model"]["tiny"], **fields}
    with pytest.raises(ValueError, match=f"^{named}:"):
        workload_from_mapping(values)


@pytest.mark.slow
def test_a_tiny_moe_grpo_run_on_cpu_writes_a_full_record(tmp_path, model_cache):
    pytest.importorskip("trl")
    result = run_cli(
        "run",
        "--framework",
        "trl",
        "--workload",
        "gsm8k-grpo-tiny-moe",
        "--steps",
        "2",
        "--out",
        str(tmp_path / "out"),
        timeout=900,
    )
    assert result.returncode == 0, result.stderr
    run_dir = Path(result.stdout.strip().splitlines()[-1])
    record = read_record(run_dir)
    assert record["status"] == "succeeded" and record["workload"]["name"] == "gsm8k-grpo-tiny-moe"
    config = json.loads((Path(record["model_path"]) / "config.json").read_text())
    assert config["model_type"] == "qwen2_moe" and config["num_experts"] == 8
    steps = record["steps"]
    assert steps["step"].tolist() == [1, 2] and (steps["step_time_s"] > 0).all()
    assert (steps["time_update_actor_s"] > 0).all() and (steps["response_tokens"] == 16 * 32).all()
    prediction = json.loads((run_dir / "prediction.json").read_text())
    assert prediction["available"] and prediction["step_time_s"] > 0
    # The prediction's arch is the built config's: MoE, top-2 of 8, far fewer active than total parameters.
    arch = load_hf_config(record["model_path"])
    assert arch.moe_top_k == 2 and arch.param_count().active < 0.6 * arch.param_count().total
    assert 0 < record["summary"]["mfu"]["median"] < 1
    assert record["vs_model"]["step"]["measured_over_predicted"] > 0
    report = run_cli("report", str(run_dir), "--out", str(tmp_path / "report.html"))
    assert report.returncode == 0, report.stderr
    assert "gsm8k-grpo-tiny-moe" in (tmp_path / "report.html").read_text()
