"""The GPU check, on a CPU: its script's syntax and refusal, the carried wheel set, the result
parser on the fixture output folder (tests/data/gpu_check, synthetic), and the GPU probe's refusal."""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pandas as pd
import pytest
from packaging.requirements import Requirement

from tests.conftest import PROJECT_ROOT

SCRIPT = PROJECT_ROOT / "benchmarks" / "gpu_check.sh"
FIXTURE = PROJECT_ROOT / "tests" / "data" / "gpu_check"
sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))

import gpu_check_results  # noqa: E402  (benchmarks/ is scripts, not a package)
import gpu_wheels  # noqa: E402


def test_script_parses_and_a_broken_copy_does_not(tmp_path):
    assert subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True).returncode == 0
    broken = tmp_path / "broken.sh"
    broken.write_text(SCRIPT.read_text().replace("done <", "<", 1))
    assert subprocess.run(["bash", "-n", str(broken)], capture_output=True).returncode != 0


def test_script_refuses_a_machine_without_cuda(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    out = tmp_path / "out"
    done = subprocess.run(
        ["bash", str(SCRIPT), str(tmp_path / "wheels"), str(out)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHON": sys.executable},
        timeout=120,
    )
    assert done.returncode == 2
    assert "error: no CUDA device" in (out / "gpu_check.log").read_text()


def test_script_returns_few_files_two_folders_deep():
    """The device returns at most 8 files from $OUT, no more than 2 folders down."""
    text = SCRIPT.read_text()
    written = {line.split('"$OUT/')[1].split('"')[0] for line in text.splitlines() if '"$OUT/' in line}
    assert written == {
        "gpu_check.log",
        "environment.txt",
        "gpu_probe.json",
        "gpu_overheads.json",
        "summary.json",
        "records.tar.gz",
    }
    assert all("/" not in name for name in written)
    assert "--no-index" in text and "gsm8k-grpo-qwen05b-random" in text and "rlbench.harness.predict.gpu_probe" in text
    assert "benchmarks/measure_gpu_overheads.py" in text


def _installed_requires(name: str, extras: set[str]) -> list[Requirement]:
    """Requirements of an installed distribution that hold on the GPU machine for these extras."""
    found = []
    for text in importlib.metadata.requires(name) or []:
        req = Requirement(text)
        marker = req.marker
        if (
            marker is None
            and "" in extras
            or marker is not None
            and any(marker.evaluate(gpu_wheels.MARKER_ENV | {"extra": e}) for e in extras)
        ):
            req.marker = None
            found.append(req)
    return found


def test_every_needed_package_is_in_the_image_or_carried():
    lock = gpu_wheels.read_lock()
    for name, version in lock.items():  # the versions carried are the ones these tests run with
        assert importlib.metadata.version(name) == version, name
    missing = gpu_wheels.uncovered(gpu_wheels.root_requirements(), set(lock), _installed_requires)
    assert missing == []


def test_uncovered_names_a_package_neither_holds():
    roots = gpu_wheels.root_requirements() + [Requirement("not-in-the-image-pkg>=1")]
    lock = set(gpu_wheels.read_lock()) - {"dill"}
    missing = gpu_wheels.uncovered(roots, lock, _installed_requires)
    assert sorted({Requirement(m.split(" (from")[0]).name for m in missing}) == ["dill", "not-in-the-image-pkg"]


def test_image_list_and_markers(tmp_path):
    image = gpu_wheels.read_image()
    assert image["torch"] == "2.11.0" and image["transformers"] == "5.17.0" and "pandas" in image
    assert "trl" not in image and "datasets" not in image
    wheel = tmp_path / "demo-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(
            "demo-1.0.dist-info/METADATA",
            "Name: demo\nVersion: 1.0\n"
            "Requires-Dist: always\nRequires-Dist: old; python_version < '3.11'\n"
            "Requires-Dist: windows; sys_platform == 'win32'\n"
            "Requires-Dist: extra-only; extra == 'x'\n",
        )
    assert [r.name for r in gpu_wheels.wheel_requirements(wheel, {""})] == ["always"]
    assert [r.name for r in gpu_wheels.wheel_requirements(wheel, {"x"})] == ["extra-only"]


def _records(tmp_path: Path) -> Path:
    with tarfile.open(FIXTURE / "records.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    return tmp_path / "records"


def _verdicts(summary: dict) -> dict[tuple[str, str], bool]:
    return {(c["check"], c["run"]): c["passed"] for c in summary["checks"]}


def test_fixture_passes_every_check(tmp_path):
    summary = gpu_check_results.summarize(_records(tmp_path), FIXTURE / "gpu_probe.json")
    assert summary["all_passed"], [c for c in summary["checks"] if not c["passed"]]
    assert len(summary["checks"]) == 11 and summary["gpu"] == "NVIDIA H200" and summary["fixture"]
    stored = json.loads((FIXTURE / "summary.json").read_text())
    assert _verdicts(stored) == _verdicts(summary)


def _edit_steps(record_dir: Path, **columns) -> None:
    path = record_dir / "steps.parquet"
    steps = pd.read_parquet(path)
    for name, fn in columns.items():
        steps[name] = fn(steps[name]) if name in steps else fn(None)
    steps.to_parquet(path, index=False)


@pytest.mark.parametrize(
    "edit, failed",
    [
        ({"power_mean_w": lambda s: s * 0}, {"nvml_sampling", "step_energy"}),  # no power: no energy ratio either
        ({"gpu_util_mean_pct": lambda s: s * 0}, {"nvml_sampling"}),
        ({"energy_j": lambda s: s * 1.3}, {"step_energy"}),
        ({"energy_j": lambda s: -s}, {"step_energy"}),
        ({"mfu": lambda s: s + 1.0}, {"mfu"}),
        ({"mfu": lambda s: s * float("nan")}, {"mfu"}),
        ({"peak_device_memory_gb": lambda s: s * float("nan")}, {"peak_memory"}),
    ],
)
def test_each_check_fails_on_its_fault(tmp_path, edit, failed):
    root = _records(tmp_path)
    _edit_steps(next((root / "qwen05b").iterdir()), **edit)
    verdicts = _verdicts(gpu_check_results.summarize(root, None))
    assert {key for key, ok in verdicts.items() if not ok} == {(name, "qwen05b") for name in failed}


def test_sampling_fails_at_the_wrong_rate_and_sampler_check_on_a_sampled_off_arm(tmp_path):
    root = _records(tmp_path)
    tiny = next((root / "tiny").iterdir())
    run = json.loads((tiny / "run.json").read_text())
    run["telemetry"]["rate_hz"] = 50.0  # the rows are 10 Hz
    (tiny / "run.json").write_text(json.dumps(run))
    off = next((root / "sampler-off").iterdir())
    run = json.loads((off / "run.json").read_text())
    run["telemetry"] = {"rate_hz": 10.0}
    (off / "run.json").write_text(json.dumps(run))
    verdicts = _verdicts(gpu_check_results.summarize(root, None))
    assert not verdicts[("nvml_sampling", "tiny")] and not verdicts[("sampler_overhead", "tiny")]


def test_energy_fails_without_the_counter(tmp_path):
    root = _records(tmp_path)
    tiny = next((root / "tiny").iterdir())
    table = pd.read_parquet(tiny / "telemetry.parquet")
    table["energy_j"] = float("nan")
    table.to_parquet(tiny / "telemetry.parquet", index=False)
    summary = gpu_check_results.summarize(root, None)
    energy = next(c for c in summary["checks"] if c["check"] == "step_energy" and c["run"] == "tiny")
    assert not energy["passed"] and "no NVML energy counter" in energy["detail"]
    assert [c["check"] for c in summary["checks"] if not c["passed"]] == ["step_energy"]


def test_sampler_slowdown_fails_and_missing_runs_fail(tmp_path):
    root = _records(tmp_path)
    for record in (root / "sampler-on").iterdir():
        _edit_steps(record, step_time_s=lambda s: s * 1.3)
    shutil.rmtree(root / "qwen05b")
    summary = gpu_check_results.summarize(root, None)
    verdicts = _verdicts(summary)
    assert not verdicts[("sampler_overhead", "tiny")]
    assert summary["checks"][-3]["figures"]["verdict"] == "regressed"
    assert not verdicts[("run_succeeded", "qwen05b")] and not verdicts[("mfu", "qwen05b")]


def test_summarize_cli_exit_codes(tmp_path):
    script = PROJECT_ROOT / "benchmarks" / "gpu_check_results.py"
    root = _records(tmp_path)
    ok = subprocess.run(
        [sys.executable, str(script), "summarize", str(root), "--out", str(tmp_path / "s.json")],
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0 and json.loads((tmp_path / "s.json").read_text())["all_passed"]
    _edit_steps(next((root / "tiny").iterdir()), mfu=lambda s: s * 0)
    bad = subprocess.run(
        [sys.executable, str(script), "summarize", str(root), "--out", str(tmp_path / "s.json")],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 1 and "FAIL mfu [tiny]" in bad.stdout
    missing = subprocess.run(
        [sys.executable, str(script), "publish", str(tmp_path / "nope")], capture_output=True, text=True
    )
    assert missing.returncode == 2 and missing.stderr.startswith("error:") and len(missing.stderr.splitlines()) == 1


def test_publish_writes_entry_and_constants_the_model_reads(tmp_path):
    from rlbench.harness.perfmodel.gpu_measured import load_measured, measured_hardware

    entry, constants = gpu_check_results.publish(FIXTURE, tmp_path / "docs", tmp_path / "measured")
    text = entry.read_text()
    assert entry.name == "2026-12-05-nvidia-h200.md" and "FIXTURE, not a measurement" in text
    assert "| step_energy | qwen05b | pass |" in text and "| gen | 3.080 | 0.050 | 61.59 |" in text
    assert "71% of the datasheet's 989 TFLOP/s dense" in text
    data = json.loads(constants.read_text())
    assert constants.name == "nvidia-h200--580.159.04.json" and data["fixture"]
    # a fixture is never a measured row; the same file without the label is
    assert load_measured("H200", folder=constants.parent) is None
    data.pop("fixture")
    constants.write_text(json.dumps(data))
    row = measured_hardware("H200", "580.159.04", folder=constants.parent)
    assert row.bf16_flops == 7.0e14 and row.hbm_bytes_per_s == 4.0e12 and row.op_latency_s == 2e-4
    assert row.hbm_bytes == 141e9 and len(row.matmul_rates) == 6 and "gpu_probe" in row.source
    assert measured_hardware("NVIDIA H200", "999.0", folder=constants.parent) is None
    assert measured_hardware("H100", folder=constants.parent) is None


@pytest.mark.parametrize("module", ["rlbench.harness.predict.gpu_probe", None])
def test_probe_refuses_without_cuda(tmp_path, module):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    command = ["-m", module] if module else [str(PROJECT_ROOT / "benchmarks" / "measure_gpu_overheads.py")]
    done = subprocess.run(
        [sys.executable, *command, "--out", str(tmp_path / "p.json")], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2
    assert done.stderr.startswith("error: no CUDA device") and len(done.stderr.splitlines()) == 1
    assert not (tmp_path / "p.json").exists()


@pytest.mark.gpu
def test_probe_on_a_gpu_gives_what_publish_reads(tmp_path):
    from rlbench.harness.predict import gpu_probe

    assert gpu_probe.main(["--out", str(tmp_path / "p.json")]) == 0
    probe = json.loads((tmp_path / "p.json").read_text())
    assert probe["bf16_flops_per_s"] > 0 and probe["mem_bytes_per_s"] > 0 and probe["op_latency_s"] > 0
    assert len(probe["matmul_rates"]) == len(gpu_probe.RATE_ROWS) * len(gpu_probe.RATE_DIMS)
    assert [row[0] for row in probe["decode_step_s"]["rows"]] == list(gpu_probe.DECODE_BATCHES)
    constants = gpu_check_results.measured_constants(probe, "docs/measurements/x.md")
    assert all(constants[key] is not None for key in ("gpu_name", "driver", "bf16_flops_per_s", "kernel_launch_s"))
