"""The FLOP formulas against torch's own count and against hand arithmetic on published configs.

torch.utils.flop_counter.FlopCounterMode counts only the ops it has formulas for: mm, addmm,
bmm, baddbmm (2*m*n*k each; addmm's bias add is not counted), convolutions, and the CUDA
SDPA kernels (flash, memory-efficient, cuDNN; counted as the full square, "we aren't
accounting for causal attention"). CPU SDPA (`_scaled_dot_product_flash_attention_for_cpu`)
has no formula, so with attn_implementation="sdpa" on CPU the count is the matmuls alone; with
"eager" the attention is two bmm per layer over the full S x S scores (the causal mask is
applied after). Elementwise ops, softmax, norms and the embedding lookup are not counted.

rlbench's formula (perfmodel/flops.py): forward = 2N per token over the matmul parameters
(N = non-embedding + LM head; N also holds biases and norm weights, < 0.2% here) plus causal
attention 4*L*A*sum(t); training = 3x forward. So the counter and the formula agree on the
matmuls exactly, and on attention up to the causal half (the formula) vs the full square (the
eager count).
"""

from __future__ import annotations

import pytest

from rlbench.harness.perfmodel import flops, from_hf_config, get_arch

BATCH, SEQ = 2, 128
CONFIG = {
    "model_type": "qwen2",
    "hidden_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 688,
    "vocab_size": 2048,
    "tie_word_embeddings": True,
}


def _counted(attn: str, backward: bool) -> tuple[float, float]:
    """(matmul FLOPs, attention bmm FLOPs) torch counts for one forward (+ backward) of the batch."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from torch.utils.flop_counter import FlopCounterMode

    torch.manual_seed(0)
    config = transformers.Qwen2Config(
        **{k: v for k, v in CONFIG.items() if k != "model_type"}, attn_implementation=attn
    )
    model = transformers.Qwen2ForCausalLM(config)
    ids = torch.randint(0, CONFIG["vocab_size"], (BATCH, SEQ))
    counter = FlopCounterMode(display=False)
    with counter:
        if backward:
            model(ids).logits.float().mean().backward()
        else:
            with torch.no_grad():
                model(ids)
    ops = {str(op): n for op, n in counter.get_flop_counts()["Global"].items()}  # "aten.mm", "aten.bmm", ...
    attention = sum(n for op, n in ops.items() if "bmm" in op or "attention" in op)
    return counter.get_total_flops() - attention, attention


def _formula() -> tuple[float, float]:
    """(matmul, causal attention) forward FLOPs of the batch by rlbench's formula."""
    arch = from_hf_config(CONFIG)
    total = BATCH * flops.sequence_forward_flops(arch, SEQ)
    matmuls = BATCH * 2 * flops.matmul_params(arch) * SEQ
    return matmuls, total - matmuls


@pytest.mark.parametrize("backward", [False, True], ids=["forward", "forward+backward"])
def test_sdpa_count_is_the_matmuls(backward: bool) -> None:
    passes = 3 if backward else 1  # the backward's two matmuls per forward matmul (dX, dW)
    counted, attention = _counted("sdpa", backward)
    matmuls, causal = _formula()
    # CPU SDPA has no formula in the counter; some transformers releases (5.10) compute the rotary
    # angles with a tiny bmm (2*B*S*head_dim/2 FLOPs), which is all that may show up here.
    assert attention <= 2 * BATCH * SEQ * CONFIG["hidden_size"] // CONFIG["num_attention_heads"] / 2
    assert counted == pytest.approx(passes * matmuls, rel=0.01)  # biases and norm weights in N: < 0.2%
    assert counted == pytest.approx(passes * (matmuls + causal), rel=0.05)  # attention is ~3% of this model


@pytest.mark.parametrize("backward", [False, True], ids=["forward", "forward+backward"])
def test_eager_count_has_full_square_attention(backward: bool) -> None:
    passes = 3 if backward else 1
    counted, attention = _counted("eager", backward)
    matmuls, causal = _formula()
    assert counted == pytest.approx(passes * matmuls, rel=0.01)
    # eager multiplies the whole S x S score matrix: 4*L*A*S^2 per sequence, vs the causal S(S+1)/2
    # rel 1e-3 leaves room for the rotary-angle bmm some transformers releases add (~1e-4 of it)
    assert attention == pytest.approx(passes * causal * 2 * SEQ / (SEQ + 1), rel=1e-3)
    assert counted + attention == pytest.approx(passes * (matmuls + causal), rel=0.05)


def test_hand_counted_qwen25_7b() -> None:
    # Qwen2.5-7B config.json: hidden 3584, 28 layers, 28 heads / 4 KV heads of 128, FFN 18944,
    # vocab 152064, untied, q/k/v biases. Per layer: q, o 3584^2; k, v 3584 x 512; MLP 3 x 3584 x 18944;
    # biases 3584 + 2 x 512; two norms 2 x 3584.
    layer = 2 * 3584**2 + 2 * 3584 * 512 + 3 * 3584 * 18944 + (3584 + 1024) + 2 * 3584
    n = 28 * layer + 3584 + 152064 * 3584  # + final norm + LM head
    arch = get_arch("Qwen2.5-7B-Instruct")
    assert flops.matmul_params(arch) == n == 7_070_619_136
    assert arch.param_count().total == n + 152064 * 3584 == 7_615_616_512  # + input embedding (Qwen: 7.61B)
    assert flops.train_flops_per_token(arch, context=0) == 6 * n  # 42.4 GFLOP per token
    # + causal attention: 12 * L * A * t, A = 28 x 128 = 3584
    assert flops.train_flops_per_token(arch, context=2048) == 6 * n + 12 * 28 * 3584 * 2048


def test_hand_counted_llama3_8b() -> None:
    # Meta-Llama-3-8B config.json: hidden 4096, 32 layers, 32 heads / 8 KV heads of 128, FFN 14336,
    # vocab 128256, untied, no biases.
    arch = from_hf_config(
        {
            "model_type": "llama",
            "hidden_size": 4096,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "intermediate_size": 14336,
            "vocab_size": 128256,
            "tie_word_embeddings": False,
        },
        name="Llama-3-8B",
    )
    layer = 2 * 4096**2 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096
    n = 32 * layer + 4096 + 128256 * 4096
    assert flops.matmul_params(arch) == n == 7_504_924_672
    assert arch.param_count().total == n + 128256 * 4096 == 8_030_261_248  # Meta: 8.03B
    assert flops.forward_flops_per_token(arch, context=0) == 2 * n  # 15.0 GFLOP per token
    assert flops.train_flops_per_token(arch, context=8192) == 6 * n + 12 * 32 * 4096 * 8192
