"""Parameter counts of the performance model: a hand-counted toy model and published totals.

PYTHONPATH=/tmp/pm_shim python -m pytest tests/perfmodel/test_perfmodel_arch.py
"""

from __future__ import annotations

import json

import pytest

from rlbench.harness.errors import RLBenchError
from rlbench.harness.perfmodel import BUILTIN_ARCHS, ModelArch, from_hf_config, get_arch, load_hf_config

# layers 2, hidden 8, 2 heads of 4, 1 KV head, ffn 16, vocab 10. Per layer: q 8x8=64, k 8x4=32,
# v 32, o 64 -> 192; gated MLP 3x8x16 = 384; two norms 16 -> 592. Body 2x592 + final norm 8 = 1192.
TOY = ModelArch(name="toy", layers=2, hidden=8, heads=2, kv_heads=1, ffn=16, vocab=10)


def test_toy_param_count_by_hand() -> None:
    count = TOY.param_count()
    assert count.non_embedding == 1192
    assert count.embedding == 160  # input table + untied head, 10x8 each
    assert count.total == count.active == 1352


def test_toy_variants_by_hand() -> None:
    assert (
        ModelArch(name="t", layers=2, hidden=8, heads=2, kv_heads=1, ffn=16, vocab=10, tied_embeddings=True)
        .param_count()
        .total
        == 1192 + 80
    )
    # q/k/v biases: 8 + 4 + 4 per layer
    assert (
        ModelArch(name="t", layers=2, hidden=8, heads=2, kv_heads=1, ffn=16, vocab=10, qkv_bias=True)
        .param_count()
        .non_embedding
        == 1192 + 2 * 16
    )
    assert TOY.kv_bytes_per_token() == 2 * 2 * 1 * 4 * 2  # K and V, 2 layers, 1 head of 4, bf16


def test_moe_active_params_by_hand() -> None:
    moe = ModelArch(
        name="m", layers=2, hidden=8, heads=2, kv_heads=1, ffn=16, vocab=10, moe_experts=4, moe_top_k=1, moe_ffn=4
    )
    count = moe.param_count()
    # per layer: attention 192 + norms 16 + router 8x4 + experts 4 x (3x8x4) = 384 (active: 1 expert, 96)
    assert count.non_embedding == 2 * (192 + 16 + 32 + 384) + 8
    assert count.non_embedding_active == 2 * (192 + 16 + 32 + 96) + 8


@pytest.mark.parametrize(("name", "published"), [("Qwen2.5-0.5B-Instruct", 0.49e9), ("Qwen2.5-7B-Instruct", 7.61e9)])
def test_qwen_totals_match_model_cards(name: str, published: float) -> None:
    """Totals on the Qwen2.5 model cards (https://huggingface.co/Qwen/Qwen2.5-7B-Instruct: 7.61B)."""
    assert get_arch(name).param_count().total == pytest.approx(published, rel=0.01)


@pytest.mark.parametrize(("name", "published"), [("Qwen2.5-0.5B-Instruct", 0.36e9), ("Qwen2.5-7B-Instruct", 6.53e9)])
def test_qwen_non_embedding_match_model_cards(name: str, published: float) -> None:
    assert get_arch(name).param_count().non_embedding == pytest.approx(published, rel=0.01)


def test_every_builtin_cites_its_config() -> None:
    for arch in BUILTIN_ARCHS.values():
        assert arch.source.startswith("https://huggingface.co/") and arch.source.endswith("config.json")


def test_load_hf_config_matches_builtin(tmp_path) -> None:
    # The published Qwen2.5-0.5B-Instruct config.json, trimmed to the keys the model reads.
    config = {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "hidden_size": 896,
        "intermediate_size": 4864,
        "num_attention_heads": 14,
        "num_hidden_layers": 24,
        "num_key_value_heads": 2,
        "tie_word_embeddings": True,
        "vocab_size": 151936,
    }
    folder = tmp_path / "Qwen2.5-0.5B-Instruct"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    loaded = load_hf_config(folder)
    assert loaded.name == "Qwen2.5-0.5B-Instruct"
    assert loaded.param_count() == get_arch("Qwen2.5-0.5B-Instruct").param_count()


def test_from_hf_config_moe_and_missing_keys() -> None:
    base = {
        "hidden_size": 8,
        "intermediate_size": 16,
        "num_attention_heads": 2,
        "num_hidden_layers": 2,
        "vocab_size": 10,
        "model_type": "qwen3_moe",
        "num_experts": 4,
        "num_experts_per_tok": 1,
        "moe_intermediate_size": 4,
    }
    arch = from_hf_config(base)
    assert (arch.moe_experts, arch.moe_top_k, arch.moe_ffn, arch.qkv_bias, arch.kv_heads) == (4, 1, 4, False, 2)
    with pytest.raises(RLBenchError, match="vocab_size"):
        from_hf_config({k: v for k, v in base.items() if k != "vocab_size"})


def test_load_hf_config_missing_file(tmp_path) -> None:
    with pytest.raises(RLBenchError, match="no model config"):
        load_hf_config(tmp_path)


def test_lookup_is_loose_and_suggests() -> None:
    assert get_arch("Qwen/Qwen2.5-7B-Instruct") is get_arch("qwen2.5-7b")
    with pytest.raises(RLBenchError, match=r"did you mean 'Qwen2.5-7B-Instruct'"):
        get_arch("Qwen2.5-7B-Instrct")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"layers": 0}, "layers"),
        ({"kv_heads": 3}, "kv_heads"),
        ({"hidden": 9}, "head_dim"),
        ({"moe_experts": 4, "moe_top_k": 0}, "moe_top_k"),
    ],
)
def test_arch_validation_names_field(kwargs: dict, field: str) -> None:
    args = {"layers": 2, "hidden": 8, "heads": 2, "kv_heads": 1, "ffn": 16, "vocab": 10, **kwargs}
    with pytest.raises(ValueError, match=rf"ModelArch\.{field}"):
        ModelArch(**args)
