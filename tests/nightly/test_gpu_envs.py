"""The GPU environments of benchmarks/gpu-envs/ are what users install and what the nightly suites test.

One requirements file per framework, pinning the release its adapter declares tested; the README's
recipe installs it, the workflow's matrix runs `nox -s nightly -- ENV`, which installs it the recipe's
way, and `nox -s gpu_envs` resolves it. No network, no GPU: noxfile.py runs against a stand-in for nox
that records what its sessions install and run (`python3 -m nox -s gpu_envs` resolves for real).

    .nox/tests/bin/python -m pytest tests/nightly/test_gpu_envs.py -q
"""

from __future__ import annotations

import importlib.util
import re
import sys
import types

import pytest
import yaml
from packaging.specifiers import SpecifierSet

from rlbench.adapters.common import declared_requirements
from rlbench.adapters.registry import available, get_adapter
from rlbench.harness.nightly.config import load_nightly_config
from tests.conftest import PROJECT_ROOT, readme_pins, readme_section

WORKFLOW = PROJECT_ROOT / ".github" / "workflows" / "nightly.yml"
WHEEL = "rlbench-0.1.0-py3-none-any.whl"  # what the stand-in build of rlbench's wheel returns


class RecordingSession:
    """Enough of nox.Session for noxfile's sessions: records each install and run, in order."""

    venv_backend = "virtualenv"  # nox's default, which `nightly` uses

    def __init__(self, *posargs: str) -> None:
        self.posargs = list(posargs)
        self.env: dict[str, str] = {}
        self.calls: list[tuple[str, ...]] = []

    def install(self, *args: str, **_: object) -> None:
        self.calls.append(("install", *args))

    def run(self, *args: str, **_: object) -> str:
        self.calls.append(("run", *args))
        return ""

    def log(self, *_: object) -> None:
        pass

    def error(self, message: str) -> None:
        raise SystemExit(message)  # as nox's session.error ends the session


@pytest.fixture(scope="module")
def noxfile():
    """noxfile.py imported with a stand-in `nox` (this environment has none): its sessions stay plain functions."""

    def session(*args, **_):
        return args[0] if args and callable(args[0]) else (lambda func: func)

    saved = sys.modules.get("nox")
    sys.modules["nox"] = types.SimpleNamespace(session=session, options=types.SimpleNamespace(), Session=object)
    try:
        spec = importlib.util.spec_from_file_location("rlbench_noxfile", PROJECT_ROOT / "noxfile.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop("nox")
        if saved is not None:
            sys.modules["nox"] = saved
    module._wheel = lambda session: WHEEL  # never build (or clean build folders) from a test
    return module


def test_one_environment_per_framework_at_its_tested_release(noxfile, monkeypatch):
    monkeypatch.setenv("RLBENCH_NIGHTLY_DIR", "/var/lib/rlbench")
    assert noxfile.gpu_env_names() == available()
    for name in available():
        pins = noxfile.gpu_env_pins(name)  # raises on a requirement that is not an exact pin
        adapter = get_adapter(name)
        assert SpecifierSet(adapter.tested_versions).contains(pins[adapter.distribution]), name
        assert "flash-attn" not in pins or "vllm" in pins  # the vLLM that brings the torch flash-attn builds against
        config = load_nightly_config(PROJECT_ROOT / "benchmarks" / f"nightly-{name}.yaml")
        assert {bench.framework for bench in config.matrix} == {name}  # each suite runs in its own environment


def test_what_an_environment_restates_is_the_frameworks_own_pins(noxfile):
    """vLLM and flash-attn install first, so the files restate them: the installed frameworks' metadata agrees."""
    from rlbench.adapters.trl.machine import TESTED_VLLM

    assert noxfile.gpu_env_pins("trl")["vllm"] == TESTED_VLLM
    restated = {"vllm", "flash-attn"}
    if declared_requirements("verl"):
        from rlbench.adapters.verl.machine import GPU_EXTRAS, pinned_by_verl

        own, pins = pinned_by_verl(), noxfile.gpu_env_pins("verl")
        assert {name: own[name] for name in restated} == {name: pins[name] for name in restated}
        (line,) = re.findall(r"^verl\[([\w,-]+)\]==", (PROJECT_ROOT / noxfile.GPU_ENVS / "verl.txt").read_text(), re.M)
        assert set(line.split(",")) == set(GPU_EXTRAS)  # the extras the pre-launch check reads its pins from
    if declared_requirements("openrlhf"):
        own = {
            req.name: next(iter(req.specifier)).version
            for req in declared_requirements("openrlhf")
            if req.name in restated and (req.marker is None or req.marker.evaluate({"extra": "vllm"}))
        }
        pins = noxfile.gpu_env_pins("openrlhf")
        assert own == {name: pins[name] for name in restated}


@pytest.mark.parametrize("name", available())  # one environment per framework (first test)
def test_the_readme_recipe_installs_its_file_and_rlbench_not_editable(noxfile, name):
    start, end = f"python -m venv ~/venv-{name}", f"# {name}: usable"
    recipe, pins = readme_section(start, end), noxfile.gpu_env_pins(name)
    main = f"pip install -r benchmarks/gpu-envs/{name}.txt '.[{name},gpu]'"
    assert main in recipe and " -e " not in recipe
    named = readme_pins(start, end)
    assert {dist: named.get(dist) for dist in pins} == pins  # every pin the recipe names is the file's
    if "flash-attn" in pins:  # the one step a requirements file cannot hold, after the torch it builds against
        flash_attn = f"pip install flash-attn=={pins['flash-attn']} --no-build-isolation"
        positions = [recipe.find(step) for step in (f"pip install vllm=={pins['vllm']}", flash_attn, main)]
        assert -1 not in positions and positions == sorted(positions)


@pytest.mark.parametrize("name", available())  # one environment per framework (first test)
def test_the_nightly_session_installs_the_file_as_the_recipe_does(noxfile, name):
    session = RecordingSession(name, "--update-baseline")
    noxfile.nightly(session)
    pins = noxfile.gpu_env_pins(name)
    installs = [call[1:] for call in session.calls if call[0] == "install"]
    # flash-attn builds against the torch the file's vLLM brings, so those two come first (README's recipe order).
    first = []
    if "flash-attn" in pins:
        first = [(f"vllm=={pins['vllm']}",), ("--no-build-isolation", f"flash-attn=={pins['flash-attn']}")]
    assert installs[: len(first)] == first
    env = next(args for args in installs if "-r" in args)
    assert env[env.index("-r") + 1] == f"benchmarks/gpu-envs/{name}.txt" and f"{WHEEL}[{name},gpu]" in env
    # Nothing else: no editable checkout, no extra requirement (torch, another framework) beside the file.
    allowed = {f"{dist}=={version}" for dist, version in pins.items()} | {f"{WHEEL}[{name},gpu]", WHEEL}
    for args in installs:
        assert "-e" not in args and "--editable" not in args
        named = [arg for i, arg in enumerate(args) if not arg.startswith("-") and (i == 0 or args[i - 1] != "-r")]
        assert set(named) <= allowed, args
    assert ("run", "rlbench", "nightly", "--config", f"benchmarks/nightly-{name}.yaml", "--update-baseline") in (
        session.calls
    )


def test_the_nightly_session_names_a_missing_or_misspelt_environment(noxfile):
    with pytest.raises(SystemExit, match="did you mean 'verl'"):
        noxfile.nightly(RecordingSession("verll"))
    with pytest.raises(SystemExit, match="available: openrlhf, trl, verl"):
        noxfile.nightly(RecordingSession("--update-baseline"))


def test_the_resolution_check_covers_every_environment_with_rlbenchs_own_dependencies(noxfile):
    session = RecordingSession()
    noxfile.gpu_envs(session)
    compiled = {}
    for call in session.calls:
        assert call[:4] == ("run", "uv", "pip", "compile")
        assert "x86_64-manylinux_2_28" in call and "pyproject.toml" in call
        compiled[call[-1]] = [call[i + 1] for i, arg in enumerate(call) if arg == "--extra"]
    assert compiled == {f"benchmarks/gpu-envs/{name}.txt": [name, "gpu"] for name in available()}


def test_the_workflow_runs_one_suite_per_environment_through_the_nightly_session(noxfile):
    workflow = yaml.safe_load(WORKFLOW.read_text())
    job = workflow["jobs"]["benchmark"]
    # Exactly the environments, and nothing an entry could install by itself (extras, a torch, a config).
    assert list(job["strategy"]["matrix"]) == ["gpu_env"]
    assert sorted(job["strategy"]["matrix"]["gpu_env"]) == noxfile.gpu_env_names()
    scripts = [step["run"] for step in job["steps"] if "run" in step]
    assert any("nox -s nightly -- ${{ matrix.gpu_env }}" in script for script in scripts)
    installs = [m.strip() for script in scripts for m in re.findall(r"pip3? install ([^\n|;&]+)", script)]
    assert installs == ["nox"] and not any("uv pip" in script for script in scripts)
    setup = next(step for step in job["steps"] if step.get("uses", "").startswith("actions/setup-python"))
    platform = noxfile.GPU_PLATFORM
    assert setup["with"]["python-version"] == platform[platform.index("--python-version") + 1]
