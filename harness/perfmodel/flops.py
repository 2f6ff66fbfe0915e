"""FLOP counts of the passes an RL step makes, per token and per sequence.

Derivation (Kaplan et al. 2020, "Scaling Laws for Neural Language Models", sec. 2.1;
Chowdhery et al. 2022, PaLM, appendix B):

* A matmul with an m x n weight costs 2mn FLOPs per token (one multiply, one add), so the
  weights of a forward pass cost 2N per token, N = the matmul parameters a token touches.
  Here N = non-embedding active parameters + the LM head (vocab x hidden): the head is a
  matmul even when tied to the input table, while the input lookup costs nothing. (Norm
  weights and biases are counted in N too; they are < 0.1% of it.)
* Attention adds, per layer and per token attending to `t` keys, 2*t*A for Q.K^T and
  2*t*A for the weighted sum of V (A = heads x head_dim): forward = 2N + 4*L*A*t.
* The backward pass costs twice the forward (gradients w.r.t. inputs and w.r.t. weights),
  so training = 3 x forward = 6N + 12*L*A*t per token, PaLM's 6N + 12LHQT.
* Gradient checkpointing recomputes the forward during backward: 4 x forward = 8N + 16*L*A*t.
* Decoding the token at position t (t keys, itself included) costs 2N + 4*L*A*t; prefill and
  training over a causal sequence of length S sum that over t = 1..S, i.e. 4*L*A*S(S+1)/2
  for attention. This causal sum is what FlashAttention computes and what verl's
  flops_counter counts (6 * sum(seqlen^2) * head_dim * heads * layers for training); PaLM's
  12LHQT per token counts the full square (no causal saving), twice as much attention.
* Prefill runs the output head on the last prompt position only: the engine samples from it
  alone (vLLM's LogitsProcessor takes the selected token indices; Hugging Face `generate`
  passes logits_to_keep=1, transformers generation/utils.py). So prefill + decode is one
  forward of the sequence minus the head on P - 1 positions.
* Reference and old-policy log-probs are a forward only. The PPO critic has the actor's
  body with a scalar value head (hidden x 1) instead of the LM head.

    from rlbench.harness.perfmodel import get_arch, flops
    arch = get_arch("Qwen2.5-7B-Instruct")
    flops.train_flops_per_token(arch, context=2048)        # 6N + 12*L*A*2048
    flops.decode_flops(arch, prompt_len=512, response_len=1024)   # one sequence's decode
"""

from __future__ import annotations

from rlbench.harness.perfmodel.arch import ModelArch


def head_params(arch: ModelArch, *, value_head: bool = False) -> int:
    """The output head's matmul: vocab x hidden (LM head) or hidden x 1 (value head)."""
    return arch.hidden if value_head else arch.vocab * arch.hidden


def matmul_params(arch: ModelArch, *, value_head: bool = False) -> int:
    """N of the 2N rule: non-embedding active parameters plus the output head."""
    return arch.param_count().non_embedding_active + head_params(arch, value_head=value_head)


def forward_flops_per_token(arch: ModelArch, context: float, *, value_head: bool = False) -> float:
    """2N + 4*L*A*context: one token's forward pass attending to `context` keys."""
    return 2 * matmul_params(arch, value_head=value_head) + 4 * arch.layers * arch.attn_dim * context


def train_flops_per_token(
    arch: ModelArch, context: float, *, checkpointing: bool = False, value_head: bool = False
) -> float:
    """6N + 12*L*A*context (8N + 16*L*A*context with gradient checkpointing)."""
    return passes(checkpointing) * forward_flops_per_token(arch, context, value_head=value_head)


def passes(checkpointing: bool) -> int:
    """Forward-equivalents of one training pass: forward + 2x backward (+ recomputed forward)."""
    return 4 if checkpointing else 3


def _positions_sum(start: float, count: float) -> float:
    """sum of t for t = start+1 .. start+count (count may be a mean, hence float)."""
    return count * start + count * (count + 1) / 2


def sequence_forward_flops(
    arch: ModelArch, length: float, *, start: float = 0, value_head: bool = False, head_positions: float | None = None
) -> float:
    """Forward FLOPs of `length` tokens at positions start+1..start+length, causal attention.

    head_positions: positions the output head runs on (None: all `length`).
    """
    head = head_params(arch, value_head=value_head)
    positions = length if head_positions is None else head_positions
    weights = 2 * (matmul_params(arch, value_head=value_head) - head) * length + 2 * head * positions
    return weights + 4 * arch.layers * arch.attn_dim * _positions_sum(start, length)


def prefill_flops(arch: ModelArch, prompt_len: float) -> float:
    """Forward over one prompt, building its KV cache; logits of the last position only."""
    return sequence_forward_flops(arch, prompt_len, head_positions=min(prompt_len, 1))


def decode_flops(arch: ModelArch, prompt_len: float, response_len: float) -> float:
    """One sequence's decode steps: sum over t = P+1..P+R of 2N + 4*L*A*t."""
    return sequence_forward_flops(arch, response_len, start=prompt_len)


def train_sequence_flops(
    arch: ModelArch, length: float, *, checkpointing: bool = False, value_head: bool = False
) -> float:
    """Forward + backward over one sequence (hardware FLOPs: recomputation included)."""
    return passes(checkpointing) * sequence_forward_flops(arch, length, value_head=value_head)


def decode_kv_read_tokens(prompt_len: float, response_len: float) -> float:
    """Cached tokens one sequence's decode reads in total: sum over steps of the context."""
    return _positions_sum(prompt_len, response_len)
