"""The tiny offline model: Qwen2-style, head_dim 64, deterministic for a seed, built once."""

from __future__ import annotations

import hashlib
import json

import pytest

pytest.importorskip("transformers")

from rlbench.workloads.spec import TinyModelSpec  # noqa: E402
from rlbench.workloads.tiny_model import build_tiny_model  # noqa: E402

CORPUS = ["Janet has 16 eggs and eats 3. How many are left? #### 13"] * 50 + [
    f"{i} + {i} = {2 * i}" for i in range(200)
]
SPEC = TinyModelSpec(vocab_size=400, num_layers=2)


def _digest(folder):
    return hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()


def test_same_seed_same_model_other_seed_other_model(tmp_path, monkeypatch):
    monkeypatch.setenv("RLBENCH_CACHE", str(tmp_path / "a"))
    first = build_tiny_model(SPEC, CORPUS, seed=1)
    monkeypatch.setenv("RLBENCH_CACHE", str(tmp_path / "b"))
    again = build_tiny_model(SPEC, CORPUS, seed=1)
    other = build_tiny_model(SPEC, CORPUS, seed=2)
    assert first != again and _digest(first) == _digest(again)
    assert (first / "tokenizer.json").read_text() == (again / "tokenizer.json").read_text()
    assert _digest(other) != _digest(first)


def test_architecture_and_tokenizer(tmp_path, monkeypatch):
    monkeypatch.setenv("RLBENCH_CACHE", str(tmp_path))
    folder = build_tiny_model(SPEC, CORPUS, seed=0)
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "qwen2"
    assert config["hidden_size"] // config["num_attention_heads"] == 64
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert tokenizer.eos_token == "<|endoftext|>" and tokenizer.pad_token_id != tokenizer.eos_token_id
    text = "Natalia sold 48 clips in April"
    assert tokenizer.decode(tokenizer(text)["input_ids"]) == text
    assert build_tiny_model(SPEC, CORPUS, seed=0) == folder  # cached, not rebuilt
