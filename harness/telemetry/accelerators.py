"""The NVIDIA GPUs of this machine: the one discovery the runner, the adapters, telemetry and pricing use.

NVML (nvidia-ml-py) gives names, memory and the driver; without it `nvidia-smi` gives the same;
without either, where the driver shows GPUs (/dev/nvidiaN), torch's CUDA count says how many there
are. Their name is then unknown, so a run on them is priced "n/a", never on the CPU row.

    python -c "from rlbench.harness.telemetry.accelerators import gpus; print(gpus())"
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

UNKNOWN_GPU = "NVIDIA GPU (name unknown: neither nvidia-ml-py nor nvidia-smi here)"


@functools.cache  # the machine's GPUs do not change within a process; NVML init is not free
def gpus() -> tuple[list[dict[str, Any]], str | None]:
    """(GPUs with index, name and memory_gb, driver version); empty where there is no NVIDIA GPU."""
    found = _nvml_gpus()
    if found is None:
        found = _smi_gpus()
    if found is None:
        count = _torch_cuda_count() if nvidia_driver_present() else 0  # no torch import on a CPU machine
        found = ([{"index": i, "name": UNKNOWN_GPU, "memory_gb": None} for i in range(count)], None)
    return found


def gpu_count() -> int:
    """How many NVIDIA GPUs `gpus()` found."""
    return len(gpus()[0])


def nvidia_driver_present(dev: Path = Path("/dev")) -> bool:
    """Whether the NVIDIA driver exposes a GPU here (its /dev/nvidiaN nodes), without NVML."""
    return any(node.name[len("nvidia") :].isdigit() for node in dev.glob("nvidia*"))


def import_pynvml() -> ModuleType:
    """NVML's Python module (nvidia-ml-py), or ImportError. Some framework stacks install the deprecated `pynvml`
    package over it, whose import warns (FutureWarning) in every process that asks: a line a user cannot act on,
    said two or three times a run; the module works the same, so the warning is not shown."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import pynvml  # from nvidia-ml-py

    return pynvml


def _nvml_gpus() -> tuple[list[dict[str, Any]], str | None] | None:
    """None where NVML cannot answer (nvidia-ml-py missing, or no driver): the caller asks elsewhere."""
    try:
        pynvml = import_pynvml()
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return [], None  # nvidia-ml-py is installed but no driver answers: no GPU
    try:
        found = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(handle)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle).total
            found.append(
                {"index": index, "name": name.decode() if isinstance(name, bytes) else name, "memory_gb": memory / 1e9}
            )
        driver = pynvml.nvmlSystemGetDriverVersion()
        return found, driver.decode() if isinstance(driver, bytes) else driver
    finally:
        pynvml.nvmlShutdown()


def _smi_gpus() -> tuple[list[dict[str, Any]], str | None] | None:
    """The same from `nvidia-smi` (MiB as it reports them); None where it is missing or fails."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    query = "--query-gpu=index,name,memory.total,driver_version"
    try:
        out = subprocess.run(
            [smi, query, "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    found, driver = [], None
    try:
        for line in out.stdout.strip().splitlines():
            index, name, memory_mib, driver = (field.strip() for field in line.split(","))
            found.append({"index": int(index), "name": name, "memory_gb": float(memory_mib) * 2**20 / 1e9})
    except ValueError:  # a format this parser does not know: ask torch instead
        return None
    return found, driver


def _torch_cuda_count() -> int:
    """torch's count of CUDA devices, without creating a CUDA context in this process."""
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count()
