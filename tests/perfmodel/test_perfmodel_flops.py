"""FLOP formulas checked against hand arithmetic on a toy model.

Toy (see test_perfmodel_arch.py): N = non-embedding 1192 + LM head 80 = 1272 matmul
parameters; L = 2 layers, A = heads x head_dim = 8.
"""

from __future__ import annotations

from rlbench.harness.perfmodel import ModelArch, flops

TOY = ModelArch(name="toy", layers=2, hidden=8, heads=2, kv_heads=1, ffn=16, vocab=10)
N = 1272


def test_matmul_params() -> None:
    assert flops.matmul_params(TOY) == N
    assert flops.matmul_params(TOY, value_head=True) == 1192 + 8  # scalar head instead of LM head


def test_forward_and_training_per_token() -> None:
    assert flops.forward_flops_per_token(TOY, context=5) == 2 * N + 4 * 2 * 8 * 5 == 2864
    assert flops.train_flops_per_token(TOY, context=5) == 6 * N + 12 * 2 * 8 * 5 == 8592
    assert flops.train_flops_per_token(TOY, context=5, checkpointing=True) == 8 * N + 16 * 2 * 8 * 5 == 11456


HEAD = 80  # vocab 10 x hidden 8


def test_causal_sequence_sums() -> None:
    # positions 1..3 attend to 1, 2, 3 keys: 2N*3 + 4*L*A*(1+2+3) for a full forward
    assert flops.sequence_forward_flops(TOY, 3) == 2 * N * 3 + 64 * 6 == 8016
    # prefill samples from its last position only (vLLM, HF generate logits_to_keep=1): the head runs once
    assert flops.prefill_flops(TOY, 3) == 2 * (N - HEAD) * 3 + 2 * HEAD + 64 * 6 == 7696
    # decode after a 2-token prompt: tokens at positions 3, 4, 5
    assert flops.decode_flops(TOY, prompt_len=2, response_len=3) == 2 * N * 3 + 64 * (3 + 4 + 5) == 8400
    assert flops.decode_kv_read_tokens(2, 3) == 12
    # prefill + decode = one forward over the whole sequence, less the head on the P - 1 unsampled prompt positions
    assert flops.prefill_flops(TOY, 2) + flops.decode_flops(TOY, 2, 3) == flops.sequence_forward_flops(
        TOY, 5
    ) - 2 * HEAD * (2 - 1)


def test_training_sequence_is_three_forwards() -> None:
    assert flops.train_sequence_flops(TOY, 4) == 3 * flops.sequence_forward_flops(TOY, 4)
    assert flops.train_sequence_flops(TOY, 4, checkpointing=True) == 4 * flops.sequence_forward_flops(TOY, 4)
