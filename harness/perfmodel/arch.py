"""Decoder-only transformer shapes and their parameter counts, plus a cited built-in table.

The counts follow the Hugging Face Qwen2 / Llama modules exactly: q, k, v, o projections
(q/k/v biases where the config has them), a gated MLP (gate, up, down), two RMSNorms a
layer, a final norm, the input embedding and an LM head that may be tied to it.

Mixture of experts (Qwen2-MoE / Qwen3-MoE / OLMoE / Mixtral modules): every layer's MLP is a
router (hidden x experts), `moe_experts` gated experts of width `moe_ffn`, of which a token
uses `moe_top_k`, plus optional shared experts every token uses (`moe_shared_ffn`, their
summed width; Qwen2-MoE adds a hidden x 1 gate on them). FLOPs count the active parameters
(`ParamCount.active`: top-k + shared experts + router); memory counts every expert
(`ParamCount.total`, `expert_params` for the part expert parallelism shards). Layers that keep
a dense MLP (Qwen's `mlp_only_layers`, DeepSeek's `first_k_dense_replace`) are not modelled:
every layer is taken as MoE.

    from rlbench.harness.perfmodel import get_arch, load_hf_config
    arch = get_arch("Qwen2.5-7B-Instruct")
    arch.param_count().total          # 7_615_616_512 (Qwen reports 7.61B)
    mine = load_hf_config("/path/to/model/config.json")
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlbench.harness.errors import RLBenchError
from rlbench.harness.perfmodel.names import lookup


@dataclass(frozen=True, kw_only=True, slots=True)
class ParamCount:
    """Parameter totals; `embedding` is the input table plus an untied LM head."""

    total: int
    active: int  # parameters a token touches (MoE: top-k experts only); equals total when dense
    embedding: int
    non_embedding: int
    non_embedding_active: int


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelArch:
    name: str = "custom"
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int  # intermediate size of the dense MLP
    vocab: int
    head_dim: int | None = None  # None: hidden // heads
    tied_embeddings: bool = False
    qkv_bias: bool = False
    moe_experts: int = 0  # 0: dense
    moe_top_k: int = 0
    moe_ffn: int | None = None  # intermediate size of one expert; None: ffn
    moe_shared_ffn: int = 0  # summed intermediate size of the shared experts every token uses; 0: none
    moe_shared_gate: bool = False  # Qwen2-MoE's sigmoid gate (hidden x 1) on the shared expert
    source: str = ""

    def __post_init__(self) -> None:
        for field in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab"):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"ModelArch.{field}={value!r}: must be a positive integer")
        if self.heads % self.kv_heads:
            raise ValueError(f"ModelArch.kv_heads={self.kv_heads}: must divide heads={self.heads}")
        if self.head_dim is None:
            if self.hidden % self.heads:
                raise ValueError(
                    f"ModelArch.head_dim: hidden={self.hidden} is not a multiple of heads={self.heads}; give head_dim"
                )
            object.__setattr__(self, "head_dim", self.hidden // self.heads)
        elif self.head_dim < 1:
            raise ValueError(f"ModelArch.head_dim={self.head_dim!r}: must be a positive integer")
        if self.moe_experts < 0 or (self.moe_experts and not 1 <= self.moe_top_k <= self.moe_experts):
            raise ValueError(
                f"ModelArch.moe_top_k={self.moe_top_k}: must be in 1..moe_experts ({self.moe_experts}) for an MoE model"
            )
        if self.moe_ffn is None:
            object.__setattr__(self, "moe_ffn", self.ffn)
        if (
            not isinstance(self.moe_shared_ffn, int)
            or self.moe_shared_ffn < 0
            or (self.moe_shared_ffn and not self.moe_experts)
        ):
            raise ValueError(
                f"ModelArch.moe_shared_ffn={self.moe_shared_ffn!r}: must be an integer >= 0, "
                "and only on an MoE model (moe_experts > 0)"
            )

    @property
    def attn_dim(self) -> int:
        """Width of the concatenated query heads (equals hidden for these models)."""
        return self.heads * self.head_dim  # type: ignore[operator]

    def _attention_params(self) -> int:
        kv = self.kv_heads * self.head_dim  # type: ignore[operator]
        weights = 2 * self.hidden * self.attn_dim + 2 * self.hidden * kv  # q, o and k, v
        return weights + ((self.attn_dim + 2 * kv) if self.qkv_bias else 0)

    def _mlp_params(self) -> tuple[int, int]:
        """(all, active) MLP parameters of one layer; a gated MLP has three matrices."""
        if not self.moe_experts:
            dense = 3 * self.hidden * self.ffn
            return dense, dense
        expert = 3 * self.hidden * self.moe_ffn  # type: ignore[operator]
        router = self.hidden * self.moe_experts
        shared = 3 * self.hidden * self.moe_shared_ffn + (self.hidden if self.moe_shared_gate else 0)
        return self.moe_experts * expert + router + shared, self.moe_top_k * expert + router + shared

    @property
    def is_moe(self) -> bool:
        return self.moe_experts > 0

    def expert_params(self) -> int:
        """Parameters of the routed experts, all layers: what expert parallelism shards (0 when dense)."""
        return self.layers * self.moe_experts * 3 * self.hidden * self.moe_ffn if self.moe_experts else 0  # type: ignore[operator]

    def param_count(self) -> ParamCount:
        mlp_all, mlp_active = self._mlp_params()
        per_layer = self._attention_params() + 2 * self.hidden  # two RMSNorm weights
        body = self.layers * (per_layer + mlp_all) + self.hidden  # + final norm
        body_active = self.layers * (per_layer + mlp_active) + self.hidden
        embedding = self.vocab * self.hidden * (1 if self.tied_embeddings else 2)
        return ParamCount(
            total=body + embedding,
            active=body_active + embedding,
            embedding=embedding,
            non_embedding=body,
            non_embedding_active=body_active,
        )

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        """K and V of every layer for one token (bf16 by default)."""
        return 2 * self.layers * self.kv_heads * self.head_dim * dtype_bytes  # type: ignore[operator]

    def weight_bytes(self, dtype_bytes: int = 2) -> int:
        return self.param_count().total * dtype_bytes


_REQUIRED = {
    "layers": "num_hidden_layers",
    "hidden": "hidden_size",
    "heads": "num_attention_heads",
    "ffn": "intermediate_size",
    "vocab": "vocab_size",
}


def from_hf_config(config: dict[str, Any], name: str | None = None, where: str = "config.json") -> ModelArch:
    """Build a ModelArch from the dict of a Hugging Face `config.json`.

    A missing `tie_word_embeddings` means untied (the Qwen2 and Llama config classes default
    to False); q/k/v biases follow `attention_bias`, defaulting to True for `model_type` "qwen2"
    and "qwen2_moe" (whose config.json never states it; both modules build q/k/v with a bias).
    MoE keys: num_experts / num_local_experts / n_routed_experts, num_experts_per_tok,
    moe_intermediate_size; shared experts from shared_expert_intermediate_size (Qwen2-MoE, with
    its gate) or n_shared_experts x moe_intermediate_size (DeepSeek).
    """
    if not isinstance(config, dict):
        raise RLBenchError(f"{where} holds a {type(config).__name__}, not a JSON object; pass a model's config.json")
    missing = [key for key in _REQUIRED.values() if key not in config]
    if missing:
        raise RLBenchError(f"{where} lacks {', '.join(missing)}; is it a decoder-only LM config?")

    def count(key: str, low: int = 1) -> int:
        return _count(config, key, where, low)

    def optional(key: str, low: int = 1) -> int | None:
        return count(key, low) if config.get(key) is not None else None

    experts_key = next((k for k in ("num_experts", "num_local_experts", "n_routed_experts") if config.get(k)), None)
    experts = count(experts_key, low=0) if experts_key else 0
    heads = count("num_attention_heads")
    kv_heads = optional("num_key_value_heads") or heads
    if heads % kv_heads:
        raise RLBenchError(
            f"{where}: num_key_value_heads={kv_heads} must divide num_attention_heads={heads} "
            "(grouped-query attention shares each KV head among a whole number of query heads)"
        )
    top_k = count("num_experts_per_tok", low=0) if experts else 0
    if experts and not 1 <= top_k <= experts:
        raise RLBenchError(
            f"{where}: num_experts_per_tok={top_k} must be in 1..{experts_key} ({experts}) for an "
            "MoE model; fix the config"
        )
    return ModelArch(
        name=name or config.get("_name_or_path") or config.get("model_type") or "custom",
        **{field: count(key) for field, key in _REQUIRED.items()},
        kv_heads=kv_heads,
        head_dim=optional("head_dim"),
        tied_embeddings=bool(config.get("tie_word_embeddings", False)),
        qkv_bias=bool(config.get("attention_bias", config.get("model_type") in ("qwen2", "qwen2_moe"))),
        moe_experts=experts,
        moe_top_k=top_k,
        moe_ffn=optional("moe_intermediate_size"),
        **_shared_experts(config, experts, count, optional),
        source="config.json",
    )


def _shared_experts(config: dict[str, Any], experts: int, count: Any, optional: Any) -> dict[str, Any]:
    if not experts:
        return {}
    if config.get("shared_expert_intermediate_size"):  # Qwen2-MoE: one shared expert behind a sigmoid gate
        return {"moe_shared_ffn": count("shared_expert_intermediate_size"), "moe_shared_gate": True}
    shared = optional("n_shared_experts", low=0) or 0  # DeepSeek: n shared experts of the routed width
    width = optional("moe_intermediate_size") or count("intermediate_size")
    return {"moe_shared_ffn": shared * width} if shared else {}


def _count(config: dict[str, Any], key: str, where: str, low: int = 1) -> int:
    """config[key] as an integer >= low: 28 or 28.0, never 2.7 (which int() would truncate), "28" or true."""
    value = config.get(key)
    whole = isinstance(value, float) and value.is_integer()
    if isinstance(value, bool) or not (isinstance(value, int) or whole) or value < low:
        raise RLBenchError(f"{where}: {key}={json.dumps(value)} must be a whole number >= {low}; fix the config")
    return int(value)


def load_hf_config(path: str | Path) -> ModelArch:
    """Read `config.json` (or a model folder holding one) into a ModelArch; JSON only."""
    path = Path(path)
    if path.is_dir():
        path = path / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RLBenchError(f"no model config at {path}; pass a config.json or a folder with one") from None
    except json.JSONDecodeError as exc:
        raise RLBenchError(f"{path} is not valid JSON: {exc}") from None
    except UnicodeDecodeError:
        raise RLBenchError(f"{path} is not UTF-8 text; pass a model's config.json") from None
    except RecursionError:
        raise RLBenchError(f"{path} is nested too deeply to be a model config; pass a model's config.json") from None
    return from_hf_config(config, name=path.parent.name or None, where=str(path))


def _hub(repo: str) -> str:
    return f"https://huggingface.co/{repo}/blob/main/config.json"


def _qwen25(size: str, layers: int, hidden: int, heads: int, kv: int, ffn: int, vocab: int, tied: bool) -> ModelArch:
    name = f"Qwen2.5-{size}-Instruct"
    return ModelArch(
        name=name,
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=kv,
        ffn=ffn,
        vocab=vocab,
        tied_embeddings=tied,
        qkv_bias=True,
        source=_hub(f"Qwen/{name}"),
    )


# Values from each model's published config.json (num_hidden_layers, hidden_size,
# num_attention_heads, num_key_value_heads, intermediate_size, vocab_size, tie_word_embeddings).
BUILTIN_ARCHS: dict[str, ModelArch] = {
    arch.name: arch
    for arch in (
        _qwen25("0.5B", 24, 896, 14, 2, 4864, 151936, True),
        _qwen25("1.5B", 28, 1536, 12, 2, 8960, 151936, True),
        _qwen25("3B", 36, 2048, 16, 2, 11008, 151936, True),
        _qwen25("7B", 28, 3584, 28, 4, 18944, 152064, False),
        _qwen25("14B", 48, 5120, 40, 8, 13824, 152064, False),
        _qwen25("32B", 64, 5120, 40, 8, 27648, 152064, False),
        ModelArch(
            name="Llama-3.1-8B",
            layers=32,
            hidden=4096,
            heads=32,
            kv_heads=8,
            ffn=14336,
            vocab=128256,
            tied_embeddings=False,
            qkv_bias=False,
            source=_hub("meta-llama/Llama-3.1-8B"),
        ),
        ModelArch(
            name="Llama-3.1-70B",
            layers=80,
            hidden=8192,
            heads=64,
            kv_heads=8,
            ffn=28672,
            vocab=128256,
            tied_embeddings=False,
            qkv_bias=False,
            source=_hub("meta-llama/Llama-3.1-70B"),
        ),
        ModelArch(
            name="Llama-3.2-1B",
            layers=16,
            hidden=2048,
            heads=32,
            kv_heads=8,
            head_dim=64,
            ffn=8192,
            vocab=128256,
            tied_embeddings=True,
            qkv_bias=False,
            source=_hub("meta-llama/Llama-3.2-1B"),
        ),
        # Qwen3 adds a per-head RMSNorm on q and k (2 x 128 weights a layer), not counted: 16K of 32.8B.
        ModelArch(
            name="Qwen3-32B",
            layers=64,
            hidden=5120,
            heads=64,
            kv_heads=8,
            head_dim=128,
            ffn=25600,
            vocab=151936,
            tied_embeddings=False,
            qkv_bias=False,
            source=_hub("Qwen/Qwen3-32B"),
        ),
        # MoE rows also from num_experts, num_experts_per_tok, moe_intermediate_size and
        # shared_expert_intermediate_size; `ffn` keeps the config's intermediate_size, which routed
        # experts do not use. Qwen3-30B-A3B: 30.5B total, 3.3B active on its model card.
        ModelArch(
            name="Qwen3-30B-A3B",
            layers=48,
            hidden=2048,
            heads=32,
            kv_heads=4,
            head_dim=128,
            ffn=6144,
            vocab=151936,
            tied_embeddings=False,
            qkv_bias=False,
            moe_experts=128,
            moe_top_k=8,
            moe_ffn=768,
            source=_hub("Qwen/Qwen3-30B-A3B"),
        ),
        # Qwen3-235B-A22B: 235B total, 22B active on its model card.
        ModelArch(
            name="Qwen3-235B-A22B",
            layers=94,
            hidden=4096,
            heads=64,
            kv_heads=4,
            head_dim=128,
            ffn=12288,
            vocab=151936,
            tied_embeddings=False,
            qkv_bias=False,
            moe_experts=128,
            moe_top_k=8,
            moe_ffn=1536,
            source=_hub("Qwen/Qwen3-235B-A22B"),
        ),
        # 14.3B total, 2.7B active on its model card; q/k/v biases as every qwen2-family config.
        ModelArch(
            name="Qwen1.5-MoE-A2.7B",
            layers=24,
            hidden=2048,
            heads=16,
            kv_heads=16,
            ffn=5632,
            vocab=151936,
            tied_embeddings=False,
            qkv_bias=True,
            moe_experts=60,
            moe_top_k=4,
            moe_ffn=1408,
            moe_shared_ffn=5632,
            moe_shared_gate=True,
            source=_hub("Qwen/Qwen1.5-MoE-A2.7B"),
        ),
        # OLMoE's q/k RMSNorms (2 x 2048 weights a layer) are not counted: 66K of 6.9B.
        ModelArch(
            name="OLMoE-1B-7B-0924",
            layers=16,
            hidden=2048,
            heads=16,
            kv_heads=16,
            ffn=1024,
            vocab=50304,
            tied_embeddings=False,
            qkv_bias=False,
            moe_experts=64,
            moe_top_k=8,
            moe_ffn=1024,
            source=_hub("allenai/OLMoE-1B-7B-0924"),
        ),
    )
}

# The Instruct and base checkpoints share one architecture.
_ALIASES = {
    "Llama-3.1-8B-Instruct": "Llama-3.1-8B",
    "Llama-3.1-70B-Instruct": "Llama-3.1-70B",
    "Llama-3.2-1B-Instruct": "Llama-3.2-1B",
    "Qwen1.5-MoE-A2.7B-Chat": "Qwen1.5-MoE-A2.7B",
    "OLMoE-1B-7B": "OLMoE-1B-7B-0924",
    "OLMoE-1B-7B-0924-Instruct": "OLMoE-1B-7B-0924",
    **{f"Qwen2.5-{size}": f"Qwen2.5-{size}-Instruct" for size in ("0.5B", "1.5B", "3B", "7B", "14B", "32B")},
}


def get_arch(name: str) -> ModelArch:
    """A built-in architecture by name ('Qwen/Qwen2.5-7B-Instruct' and 'qwen2.5-7b' both work)."""
    return lookup(BUILTIN_ARCHS, name, "model architecture", _ALIASES)
