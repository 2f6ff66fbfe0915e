"""One GPU discovery: a GPU host without nvidia-ml-py is still a GPU host, and is priced as one."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rlbench.harness.predict.run_prediction import hardware_for
from rlbench.harness.telemetry import accelerators


@pytest.fixture
def no_nvml(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    accelerators.gpus.cache_clear()
    yield
    accelerators.gpus.cache_clear()


def test_nvidia_smi_names_the_gpus_without_nvidia_ml_py(monkeypatch, no_nvml):
    monkeypatch.setattr(accelerators.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    smi = "0, NVIDIA H100 80GB HBM3, 81559, 550.54.15\n1, NVIDIA H100 80GB HBM3, 81559, 550.54.15\n"
    monkeypatch.setattr(accelerators.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, smi, ""))
    found, driver = accelerators.gpus()
    assert accelerators.gpu_count() == 2 and driver == "550.54.15"
    assert found[1] == {"index": 1, "name": "NVIDIA H100 80GB HBM3", "memory_gb": pytest.approx(85.52, abs=0.01)}
    assert hardware_for({"gpus": found}).name == "H100-SXM"  # priced on its GPU's row, not the CPU's


def test_torch_counts_unnamed_gpus_priced_n_a(monkeypatch, no_nvml):
    monkeypatch.setattr(accelerators.shutil, "which", lambda name: None)
    monkeypatch.setattr(accelerators, "nvidia_driver_present", lambda: True)
    monkeypatch.setattr(accelerators, "_torch_cuda_count", lambda: 4)
    found, driver = accelerators.gpus()
    assert accelerators.gpu_count() == 4 and driver is None
    assert hardware_for({"gpus": found}) is None  # an unknown GPU: n/a, never the CPU row


def test_a_cpu_machine_has_no_gpus(monkeypatch, no_nvml):
    monkeypatch.setattr(accelerators.shutil, "which", lambda name: None)
    monkeypatch.setattr(accelerators, "nvidia_driver_present", lambda: False)
    monkeypatch.setattr(accelerators, "_torch_cuda_count", lambda: pytest.fail("torch asked on a CPU machine"))
    assert accelerators.gpus() == ([], None) and accelerators.gpu_count() == 0
