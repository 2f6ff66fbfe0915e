"""A tail workload's tiny model: every next token is the end of text with the declared probability whatever the
context, so response lengths are geometric, the same for every framework's sampler (workloads/tail.py)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from rlbench.workloads.catalog import load_workload, workload_from_mapping
from rlbench.workloads.spec import TinyModelSpec
from rlbench.workloads.tail import declared_lengths
from rlbench.workloads.tiny_model import model_key

CORPUS = ["Janet has 16 eggs and eats 3. How many are left? #### 13"] * 50 + [
    f"{i} + {i} = {2 * i}" for i in range(200)
]


def test_the_declared_lengths_are_the_clipped_geometrics():
    declared = declared_lengths(load_workload("gsm8k-grpo-tiny-tail"))
    p, cap = 0.0625, 64
    assert declared["end_probability"] == p and declared["cap"] == cap
    # E[min(L, cap)] = sum over k < cap of P(L > k); quantile q: the least k with 1 - (1-p)^k >= q
    assert declared["mean"] == pytest.approx(sum((1 - p) ** k for k in range(cap)))
    assert (declared["p50"], declared["p90"], declared["p99"]) == (11, 36, 64)  # p99 (72) clipped to the cap
    assert declared["clipped_share"] == pytest.approx((1 - p) ** cap)
    assert declared_lengths(load_workload("gsm8k-grpo-tiny")) is None  # generated to the cap: none declared


def test_an_end_probability_needs_sampled_lengths_and_a_dense_model():
    tail = load_workload("gsm8k-grpo-tiny-tail")
    values = {**dataclasses.asdict(tail), "fixed_length": True}
    with pytest.raises(ValueError, match="fixed_length: .*end_probability would end none"):
        workload_from_mapping(values)
    with pytest.raises(ValueError, match="end_probability: is for a dense tiny model"):
        TinyModelSpec(num_experts=4, experts_per_token=1, expert_intermediate_size=64, end_probability=0.1)
    with pytest.raises(ValueError, match="end_probability"):
        TinyModelSpec(end_probability=0.9)
    # untouched models keep their cache keys: the field is left out of the key at 0
    assert model_key(TinyModelSpec(), 0, CORPUS) != model_key(TinyModelSpec(end_probability=0.0625), 0, CORPUS)


def test_every_context_ends_with_the_declared_probability(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rlbench.workloads.tiny_model import build_tiny_model

    monkeypatch.setenv("RLBENCH_CACHE", str(tmp_path))
    folder = build_tiny_model(TinyModelSpec(vocab_size=400, num_layers=2, end_probability=0.0625), CORPUS, seed=0)
    model = AutoModelForCausalLM.from_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    torch.manual_seed(0)
    contexts = torch.randint(2, len(tokenizer), (64, 40))  # random token contexts, none special
    with torch.no_grad():
        probs = model(contexts).logits.softmax(-1)  # every position of every context
    end = probs[..., tokenizer.eos_token_id]
    assert end.min().item() == pytest.approx(0.0625, rel=1e-4) and end.max().item() == pytest.approx(0.0625, rel=1e-4)
    assert probs[..., tokenizer.pad_token_id].max().item() < 1e-12  # never a pad mid-response
    others = probs.clone()
    others[..., [tokenizer.eos_token_id, tokenizer.pad_token_id]] = math.nan
    spread = others.nan_to_num(0.0).amax(-1) / (0.9375 / (len(tokenizer) - 2))
    assert spread.max().item() == pytest.approx(1.0, rel=1e-3)  # the other tokens uniformly likely
