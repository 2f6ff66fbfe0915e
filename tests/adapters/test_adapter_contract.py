"""The adapter contract, checked for every registered framework: what adapters/README.md promises.

Parametrised over the registry, so a framework added there is held to the same rules with no
test of its own: it declares its capabilities, refuses what it does not support with one line,
plans a launch without side effects, and reads an empty run folder without failing.
"""

from __future__ import annotations

import dataclasses
import importlib.util

import pandas as pd
import pytest
from packaging.specifiers import SpecifierSet

from rlbench.adapters.base import Adapter
from rlbench.adapters.registry import ADAPTERS, get_adapter
from rlbench.harness.errors import RLBenchError
from rlbench.harness.perfmodel.shapes import WorkloadShape
from rlbench.harness.spec.inputs import RunInputs
from rlbench.harness.spec.parallel import Parallelism
from rlbench.harness.spec.runspec import RunSpec
from rlbench.workloads.catalog import load_workload

FRAMEWORKS = sorted(ADAPTERS)
KNOBS = set(Parallelism().to_dict())
# A value away from the default for each knob, to ask an adapter about a knob it does not map.
SET_KNOB = {
    "dp": {"dp": 2},
    "tp": {"tp": 2},
    "rollout_tp": {"rollout_tp": 2},
    "pp": {"pp": 2},
    "pp_virtual": {"pp": 2, "pp_virtual": 2},
    "cp": {"cp": 2},
    "ep": {"dp": 2, "ep": 2},
    "sp": {"sp": 2},
    "fuse": {"fuse": ("ref_old",)},
    "placement": {"placement": "disaggregated"},
    "async": {"async_": "one-step"},
    "partial_rollout": {"placement": "disaggregated", "async_": "one-step", "partial_rollout": "on"},
}


def _spec(framework: str, **parallel) -> RunSpec:
    return RunSpec(framework=framework, workload=load_workload("gsm8k-grpo-tiny"), parallel=Parallelism(**parallel))


def _installed(adapter: Adapter) -> bool:
    return importlib.util.find_spec(adapter.distribution.replace("-", "_")) is not None


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_an_adapter_declares_what_the_harness_plans_with(framework):
    adapter = get_adapter(framework)
    assert adapter.name == framework
    assert adapter.distribution and SpecifierSet(adapter.tested_versions)  # a valid PEP 440 specifier
    assert adapter.supported_knobs <= KNOBS, adapter.supported_knobs - KNOBS
    assert isinstance(adapter.brings_own_ray, bool) and isinstance(adapter.runs_on_cpu, bool)
    usable, why = adapter.usable_here()
    assert isinstance(usable, bool) and why.strip()  # `rlbench ls` prints the reason either way


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_knob_the_adapter_does_not_map_is_refused_with_one_line(framework):
    adapter = get_adapter(framework)
    unsupported = sorted(KNOBS - adapter.supported_knobs)
    if not unsupported:
        pytest.skip(f"{framework} maps every knob")
    if adapter.version() is None:
        pytest.skip(f"{framework} is not installed here: the install check fires first")
    with pytest.raises(RLBenchError) as refused:
        adapter.check(_spec(framework, **SET_KNOB[unsupported[0]]))
    message = str(refused.value)
    assert "\n" not in message and f"{unsupported[0]}=" in message


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_framework_that_is_not_installed_is_refused_with_the_install_command(framework, monkeypatch):
    adapter = get_adapter(framework)
    monkeypatch.setattr(type(adapter), "version", lambda self: None)
    with pytest.raises(
        RLBenchError,
        match=rf"framework '{framework}' is not installed; install it with "
        rf"pip install 'rlbench\[{framework}\]'",
    ):
        adapter.check(_spec(framework))


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_planning_a_launch_has_no_side_effects(framework, tmp_path):
    adapter = get_adapter(framework)
    if not _installed(adapter):
        pytest.skip(f"{framework} is not installed here")
    inputs = RunInputs(model="/models/tiny", prompts=[])
    first = adapter.plan(_spec(framework), inputs, tmp_path)
    second = adapter.plan(_spec(framework), inputs, tmp_path)
    assert first.argv and first.describe() == second.describe()  # --dry-run prints what a run would launch
    assert list(tmp_path.iterdir()) == []  # files are the runner's to write, from plan.files
    assert adapter.metrics_file(tmp_path).is_relative_to(tmp_path)  # the runner watches it for progress


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_an_empty_run_folder_reads_as_no_steps(framework, tmp_path):
    steps = get_adapter(framework).read_steps(tmp_path)  # a run that died before its first step
    assert isinstance(steps, pd.DataFrame) and steps.empty


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_launch_shape_and_equal_work_name_real_fields(framework):
    adapter = get_adapter(framework)
    shape_fields = {f.name for f in dataclasses.fields(WorkloadShape)}
    assert set(adapter.model_shape(_spec(framework))) <= shape_fields
    assert set(adapter.lane_shape(_spec(framework))) <= shape_fields
    manifest = adapter.equal_work(_spec(framework))
    assert manifest is not None and manifest["contract"], f"{framework} does not map the equal-work contract"
