"""verl's GPU stack: the README's recipe carries verl's own pins, and the pre-launch check refuses what would crash.

The pins are read from the installed verl's metadata (its [vllm] and [fsdp] extras),
never restated here, so a new verl release is checked against its own pins.
"""

from __future__ import annotations

import re

import pytest

from rlbench.harness.errors import RLBenchError
from tests.conftest import readme_section

pytest.importorskip("verl")
from rlbench.adapters.verl import machine as verl_machine  # noqa: E402
from rlbench.adapters.verl.adapter import VerlAdapter  # noqa: E402
from rlbench.adapters.verl.machine import gpu_stack_problem, pinned_by_verl  # noqa: E402
from rlbench.harness.spec.parallel import parse_parallel  # noqa: E402
from rlbench.harness.spec.runspec import RunSpec  # noqa: E402
from rlbench.workloads.catalog import load_workload  # noqa: E402


def _recipe() -> str:
    return readme_section("python -m venv ~/venv-verl", "# verl: usable")


def test_the_readme_recipe_is_verls_own_pins():
    pins, recipe = pinned_by_verl(), _recipe()
    assert {"vllm", "torch", "transformers", "flash-attn", "cupy-cuda13x"} <= set(pins)
    for name in ("vllm", "torch", "transformers", "flash-attn", "cupy-cuda13x"):
        assert f"{name} {pins[name]}" in recipe, name
    (installed,) = re.findall(r"'verl\[([\w,-]+)\]==([\d.]+)'", recipe)
    assert set(installed[0].split(",")) == set(verl_machine.GPU_EXTRAS)
    from rlbench.harness.spec.environment import package_version

    assert installed[1] == package_version("verl")


@pytest.fixture
def gpu_node(monkeypatch):
    """A GPU node whose installed packages the test sets: {distribution: version} and importable modules."""
    state = {"versions": {"vllm": pinned_by_verl()["vllm"], "verl": "0.9.1"}, "modules": {"flash_attn", "cupy"}}
    monkeypatch.setattr("rlbench.harness.telemetry.accelerators.gpu_count", lambda: 8)
    monkeypatch.setattr(verl_machine, "package_version", lambda name: state["versions"].get(name))
    real_find_spec = verl_machine.importlib.util.find_spec
    monkeypatch.setattr(
        verl_machine.importlib.util,
        "find_spec",
        lambda name, *a: (
            object()
            if name in state["modules"]
            else None
            if name in ("flash_attn", "cupy")
            else real_find_spec(name, *a)
        ),
    )
    return state


def test_a_stack_on_verls_pins_is_ready(gpu_node):
    assert gpu_stack_problem(one_step=True) is None
    assert verl_machine.machine_ready() == (True, f"8 GPUs, vLLM {gpu_node['versions']['vllm']}")


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"versions": {"vllm": "0.29.0"}}, "vLLM 0.29.0 is installed, but verl 0.9.1 pins vllm==0.24.0"),
        ({"versions": {"vllm": None}}, "vLLM is not installed"),
        ({"modules": {"cupy"}}, "flash-attn is not installed"),
    ],
)
def test_what_would_crash_is_refused_with_the_install_command(gpu_node, change, problem):
    gpu_node["versions"].update(change.get("versions", {}))
    gpu_node["modules"] = change.get("modules", gpu_node["modules"])
    ready, why = verl_machine.machine_ready()
    assert not ready and problem in why and "pip install 'verl[verl-core,vllm,fsdp]==0.9.1'" in why


def test_one_step_off_without_cupy_is_refused_before_launch(gpu_node):
    gpu_node["modules"] = {"flash_attn"}
    assert verl_machine.machine_ready()[0]  # a synchronous run needs no cupy
    spec = RunSpec(
        framework="verl",
        workload=load_workload("gsm8k-grpo"),
        parallel=parse_parallel(["dp=4", "placement=disaggregated", "async=one-step"]),
    )
    with pytest.raises(RLBenchError, match="NCCL checkpoint engine, which needs cupy"):
        VerlAdapter().check(spec)
