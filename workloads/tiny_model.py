"""Build the CPU-sized model of a `*-tiny` workload, offline and deterministically.

A randomly initialised Qwen2-style causal LM plus a byte-level BPE tokenizer trained
with `tokenizers` on the workload's own prompts and answers, saved as a normal
Hugging Face model folder that every framework can load by path. Nothing is
downloaded. The folder is cached under `$RLBENCH_CACHE` (default
`~/.cache/rlbench`), keyed by the model spec, the seed and a digest of the corpus.

A spec with experts builds a mixture of experts whose router really routes: Qwen2-MoE
(Qwen1.5-MoE-A2.7B's layout: q/k/v biases, one sigmoid-gated shared expert) when it has a
shared expert, Qwen3-MoE (Qwen3-30B-A3B's: no biases, q/k RMSNorm) when it has none. The
load-balancing auxiliary loss is off (router_aux_loss_coef 0.0 in config.json): TRL takes
its coefficient from the config, verl's FSDP and OpenRLHF's trainers add none by default,
so every framework optimises the same loss.

A dense spec with `end_probability` p > 0 builds a model whose every next-token distribution is the same, whatever
the context: the end of text with probability p, every other token (pad excepted) equally likely
(`_end_with_probability`). Its responses then end at geometric lengths, a tail every framework's sampler draws
alike (workloads/tail.py); the rest of the network is the random model, trained as any other.

    python -c "from rlbench.workloads.tiny_model import build_tiny_model; ..."
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from rlbench.harness.settings import cache_root
from rlbench.workloads.spec import MOE_FIELDS, TinyModelSpec

# Special tokens the model and the frameworks need; "<|endoftext|>" mirrors Qwen's EOS name.
EOS, PAD = "<|endoftext|>", "<|pad|>"


def model_key(spec: TinyModelSpec, seed: int, corpus: Sequence[str]) -> str:
    fields = asdict(spec)
    if not spec.is_moe:  # the MoE fields came later: leaving them out keeps every dense model's key
        fields = {name: value for name, value in fields.items() if name not in MOE_FIELDS}
    if not spec.end_probability:  # so did the end probability: untouched models keep their keys
        fields.pop("end_probability")
    digest = hashlib.sha256()
    digest.update(json.dumps(fields, sort_keys=True).encode())
    digest.update(str(seed).encode())
    for text in corpus:
        digest.update(text.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def build_tiny_model(spec: TinyModelSpec, corpus: Sequence[str], seed: int) -> Path:
    """Return the folder of the tiny model for this spec/corpus/seed, building it once."""
    target = cache_root() / "tiny-models" / model_key(spec, seed, corpus)
    if (target / "config.json").is_file() and (target / "tokenizer.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # Build in a sibling temp folder and rename, so a crash never leaves half a model.
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=".building-"))
    try:
        tokenizer = _train_tokenizer(spec, corpus)
        tokenizer.save_pretrained(staging)
        _init_model(spec, tokenizer, seed).save_pretrained(staging)
        if not target.exists():  # another process may have finished the same build first
            os.replace(staging, target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return target


def _train_tokenizer(spec: TinyModelSpec, corpus: Sequence[str]):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=spec.vocab_size,
        special_tokens=[EOS, PAD],
        # The full byte alphabet keeps every string encodable, whatever the corpus held.
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(list(corpus), trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token=EOS, pad_token=PAD, model_max_length=4096)


def _init_model(spec: TinyModelSpec, tokenizer, seed: int):
    import torch
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # no shard-writing bars in rlbench's own output

    config_class, model_class = _classes(spec)
    fields = {k: v for k, v in hf_config_fields(spec, len(tokenizer)).items() if k != "model_type"}
    config = config_class(
        **fields,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    model = model_class(config)
    if spec.end_probability:
        _end_with_probability(model, spec.end_probability, tokenizer.eos_token_id, tokenizer.pad_token_id)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


# The direction of the residual stream that carries the end-of-text logit, and the constant the last layer writes
# along it: large enough that the final RMSNorm sees that direction alone (the rest is below 1e-3 of it in fp32).
END_DIMENSION, END_SCALE = 0, 1.0e4


def _end_with_probability(model, probability: float, eos_id: int, pad_id: int) -> None:
    """Make every next-token distribution the same whatever the context: the end of text with `probability`, pad
    never, every other token equally likely. The last layer's attention writes a constant along END_DIMENSION
    (values zeroed, their bias on: softmax weights sum to 1), the final norm keeps that dimension only, and
    only the end-of-text (and pad) embeddings have a component there, so the tied output head gives them the
    only non-zero logits. The rest of the network is the random model, and training moves it as any other."""
    import torch

    hidden = model.config.hidden_size
    ordinary = model.config.vocab_size - 2  # every token but end of text and pad
    with torch.no_grad():
        attention = model.model.layers[-1].self_attn
        attention.v_proj.weight.zero_()
        attention.v_proj.bias.fill_(1.0)
        attention.o_proj.weight.zero_()
        attention.o_proj.weight[END_DIMENSION, :] = END_SCALE / hidden
        model.model.norm.weight.zero_()
        model.model.norm.weight[END_DIMENSION] = 1.0
        embeddings = model.model.embed_tokens.weight  # the output head too (tied)
        embeddings[:, END_DIMENSION] = 0.0
        # The norm leaves sqrt(hidden) along the dimension: logit = embedding x sqrt(hidden).
        end_logit = math.log(probability * ordinary / (1.0 - probability))
        embeddings[eos_id, END_DIMENSION] = end_logit / math.sqrt(hidden)
        embeddings[pad_id, END_DIMENSION] = -40.0 / math.sqrt(hidden)


def hf_config_fields(spec: TinyModelSpec, vocab_size: int) -> dict:
    """The tiny model's config.json fields: the one mapping from its spec, which `build_tiny_model` builds the
    model from and the performance model reads its architecture from (harness.spec.model_arch). Dense it is
    Qwen2; with a shared expert Qwen2-MoE; routed experts only Qwen3-MoE."""
    dense = {
        "vocab_size": vocab_size,
        "hidden_size": spec.hidden_size,
        "intermediate_size": spec.intermediate_size,
        "num_hidden_layers": spec.num_layers,
        "num_attention_heads": spec.num_heads,
        "num_key_value_heads": spec.num_kv_heads,
        "max_position_embeddings": 4096,
        "tie_word_embeddings": True,
    }
    if not spec.is_moe:
        return {"model_type": "qwen2", **dense}
    moe = {
        **dense,
        "num_experts": spec.num_experts,
        "num_experts_per_tok": spec.experts_per_token,
        "moe_intermediate_size": spec.expert_intermediate_size,
        # Every layer sparse, none dense (the performance model takes every layer as MoE).
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        # Top-k weights renormalised to sum to 1, as Qwen3-MoE ships; the aux loss is off (module docstring).
        "norm_topk_prob": True,
        "output_router_logits": False,
        "router_aux_loss_coef": 0.0,
    }
    if spec.shared_expert_intermediate_size:
        shared = {"shared_expert_intermediate_size": spec.shared_expert_intermediate_size, "qkv_bias": True}
        return {"model_type": "qwen2_moe", **moe, **shared}
    return {"model_type": "qwen3_moe", **moe, "head_dim": spec.hidden_size // spec.num_heads, "attention_bias": False}


def _classes(spec: TinyModelSpec) -> tuple[type, type]:
    """The transformers config and model classes of the spec's architecture (hf_config_fields' model_type)."""
    if not spec.is_moe:
        from transformers import Qwen2Config, Qwen2ForCausalLM

        return Qwen2Config, Qwen2ForCausalLM
    if spec.shared_expert_intermediate_size:
        from transformers import Qwen2MoeConfig, Qwen2MoeForCausalLM

        return Qwen2MoeConfig, Qwen2MoeForCausalLM
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    return Qwen3MoeConfig, Qwen3MoeForCausalLM
