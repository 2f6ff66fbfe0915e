"""`rlbench nightly` on CPU: a real TRL run against a stored baseline, a regression fails the night.

The baseline is a real run's record with its step series rewritten to 10 ms steps,
so tonight's real run is surely slower; a second baseline, a copy of tonight's
run three times slower than its slowest step, must read as an improvement.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from rlbench.harness.errors import RLBenchError
from rlbench.harness.nightly.config import load_nightly_config
from rlbench.harness.nightly.gate import find_baseline, format_night, judge, night_rows, night_status
from rlbench.harness.record.read import read_record
from tests.conftest import PROJECT_ROOT, run_cli, synthetic_record

STEPS = 5  # 4 post-warm-up steps per side: the fewest for which the U test can reach p < 0.05


def _baseline(source: Path, folder: Path, step_s: float) -> Path:
    """A copy of a real record whose 5 steps each take about `step_s` seconds (1% spread between steps).

    Stage times and throughputs are scaled by the same factor, so the copy reads
    as the same work done at another speed.
    """
    run = folder / f"{source.name}-{step_s:g}s"
    shutil.copytree(source, run)
    steps = pd.read_parquet(run / "steps.parquet")
    row = steps.iloc[-1]
    rows = []
    for step in range(1, STEPS + 1):
        factor = step_s * (1 + 0.01 * step) / row["step_time_s"]
        scaled = {
            name: row[name] * factor
            for name in steps
            if name.startswith("time_") or name in ("step_time_s", "wall_step_time_s")
        }
        scaled |= {name: row[name] / factor for name in steps if name.endswith("tokens_per_s")}
        rows.append({**row.to_dict(), **scaled, "step": step})
    pd.DataFrame(rows).astype(steps.dtypes.to_dict()).to_parquet(run / "steps.parquet", index=False)
    record = json.loads((run / "run.json").read_text())
    record["workload"]["steps"] = STEPS
    (run / "run.json").write_text(json.dumps(record))
    return run


def _config(tmp_path: Path, matrix: list[dict]) -> Path:
    path = tmp_path / "nightly.yaml"
    path.write_text(yaml.safe_dump({"results": "runs", "baseline": "baseline", "threshold": "5%", "matrix": matrix}))
    return path


@pytest.mark.slow
def test_a_slower_night_fails_and_the_matrix_goes_on(report_run, tmp_path):
    # Steps of 10 ms: far faster than any real TRL step, so tonight's run is surely slower on any machine.
    fast = _baseline(report_run, tmp_path / "baseline", step_s=0.01)
    config = _config(
        tmp_path,
        [
            {"framework": "trl", "workload": "gsm8k-grpo-tiny", "steps": STEPS},
            {"framework": "trl", "workload": "gsm8k-grpo-tiny", "steps": STEPS, "parallel": ["dp=8"]},  # refused here
        ],
    )
    result = run_cli("nightly", "--config", str(config), "--update-baseline", timeout=600)
    assert result.returncode == 1, result.stderr
    night_dir = Path(result.stdout.strip().splitlines()[-1])
    night = json.loads((night_dir / "nightly.json").read_text())
    assert night["status"] == "regressed" and night["ended_at"]
    ran, refused = night["benchmarks"]
    assert ran["status"] == "succeeded" and ran["baseline"] == str(fast)
    assert "step_time_s" in ran["regressed"] and "tokens_per_s" in ran["regressed"]
    assert ran["comparisons"]["step_time_s"]["ratio"] > 10
    assert refused["status"] == "not run" and "dp=8" in refused["error"]
    assert "REGRESSED" in result.stdout
    assert (night_dir / "report.html").is_file() and (tmp_path / "runs" / "history.html").is_file()
    page = (night_dir / "report.html").read_text()
    assert "Tonight's verdicts" in page and "REGRESSED" in page and "night regressed" in page
    history_page = (tmp_path / "runs" / "history.html").read_text()
    assert "<h2>Nights</h2>" in history_page and f"<td>{night_dir.name}</td><td>" in history_page
    assert "<td>regressed</td>" in history_page
    assert not (tmp_path / "baseline" / Path(ran["record"]).name).exists()  # a bad night never becomes the baseline

    tonight = pd.read_parquet(Path(ran["record"]) / "steps.parquet")["step_time_s"]
    slow = _baseline(Path(ran["record"]), tmp_path / "slow-baseline", step_s=3 * tonight.max())
    verdict = judge(Path(ran["record"]), slow.parent, 0.05)
    assert verdict["baseline"] == str(slow) and verdict["regressed"] == []
    assert verdict["comparisons"]["step_time_s"]["verdict"] == "improved"
    assert judge(Path(ran["record"]), tmp_path / "none", 0.05)["note"].startswith("no baseline")


def test_a_benchmark_with_too_few_steps_makes_the_night_undecidable_not_passed(tmp_path):
    """3 vs 3 post-warm-up steps: no change can reach p < 0.05, so a 2x slower night cannot pass silently."""
    synthetic_record(tmp_path / "baseline" / "base", [1.00, 1.01, 0.99])
    tonight = synthetic_record(tmp_path / "tonight", [2.00, 2.02, 1.98])
    verdict = judge(tonight, tmp_path / "baseline", 0.05)
    assert verdict["regressed"] == [] and verdict["undecidable"] == ["step_time_s", "tokens_per_s"]
    entry = {"framework": "trl", "workload": "gsm8k-grpo-tiny", "parallel": [], "status": "succeeded", **verdict}
    night = {"benchmarks": [entry], "status": night_status([entry])}
    assert night["status"] == "undecidable"
    assert "UNDECIDABLE" in format_night(night) and "night undecidable" in format_night(night)
    assert night_status([{**entry, "undecidable": []}]) == "passed"
    assert night_status([entry, {"status": "not run"}]) == "failed"


def test_a_baseline_of_other_problems_is_no_baseline(tmp_path):
    """The nightly baseline is the newest record of the same configuration *and* data; an older record without a
    data identity still serves."""
    data = {"origin": "embedded", "location": "x", "sha256": "a" * 64}
    other = synthetic_record(tmp_path / "baseline" / "other", [1.0] * 5, data={**data, "sha256": "b" * 64})
    tonight = read_record(synthetic_record(tmp_path / "tonight", [1.0] * 5, data=data))
    assert find_baseline(tmp_path / "baseline", tonight) is None
    old = synthetic_record(tmp_path / "baseline" / "old", [1.0] * 5)
    assert find_baseline(tmp_path / "baseline", tonight) == old
    shutil.rmtree(old)
    same = synthetic_record(tmp_path / "baseline" / "same", [1.0] * 5, data=data)
    assert find_baseline(tmp_path / "baseline", tonight) == same
    assert other.is_dir()


@pytest.mark.parametrize("name", ["nightly-trl.yaml", "nightly-verl.yaml", "nightly-openrlhf.yaml"])
def test_the_shipped_matrix_is_valid(monkeypatch, name):
    monkeypatch.setenv("RLBENCH_NIGHTLY_DIR", "/var/lib/rlbench")
    config = load_nightly_config(PROJECT_ROOT / "benchmarks" / name)
    assert config.baseline == Path("/var/lib/rlbench/baseline") and config.threshold == 0.05
    from rlbench.adapters.registry import available
    from rlbench.harness.spec.parallel import parse_parallel
    from rlbench.workloads.catalog import load_workload

    for bench in config.matrix:
        assert bench.framework in available()
        load_workload(bench.workload)
        assert parse_parallel(bench.parallel).world_size == 8
    # one time-to-target benchmark per framework, learning for real: replies end where the model ends them
    (target,) = [load_workload(b.workload) for b in config.matrix if load_workload(b.workload).target is not None]
    assert target.name == "gsm8k-grpo-target" and not target.fixed_length and target.target.stop
    assert target.model.name == "Qwen/Qwen2.5-0.5B-Instruct" and target.steps > 45  # the published curve: step 45


@pytest.mark.parametrize(
    "text, problem",
    [
        ("matrix: []\nresults: r\nbaseline: b\n", "'matrix' must be a non-empty list"),
        ("matrix: [{framework: trl}]\nresults: r\nbaseline: b\n", "'workload' is required"),
        ("matrix: [{framework: trl, workload: w, gpus: 8}]\nresults: r\nbaseline: b\n", "unknown key(s) gpus"),
        (
            "matrix: [{framework: trl, workload: w}]\nresults: ${RLBENCH_UNSET_FOR_TEST}/r\nbaseline: b\n",
            "unset environment",
        ),
        ("matrix: [{framework: trl, workload: w}\n", "not valid YAML at line"),
    ],
)
def test_bad_configs_are_refused_by_name(tmp_path, text, problem):
    path = tmp_path / "n.yaml"
    path.write_text(text)
    with pytest.raises(RLBenchError, match=None) as info:
        load_nightly_config(path)
    assert problem in str(info.value)


@pytest.mark.parametrize(
    "entry, problem",
    [
        ("{framework: trll, workload: gsm8k-grpo-tiny}", "matrix[0]: unknown framework 'trll'"),
        ("{framework: trl, workload: gsm8k-grpo-tinyy}", "matrix[0]: "),
        ("{framework: trl, workload: gsm8k-grpo-tiny, parallel: [tp=2]}", "matrix[0]: --parallel tp=2"),
        ("{framework: trl, workload: gsm8k-grpo-tiny, parallel: [nodes=2]}", "matrix[0]: --parallel nodes=2"),
    ],
)
def test_the_whole_matrix_is_checked_before_the_first_benchmark(tmp_path, entry, problem):
    """A bad entry was found only when its turn came (exit 1 after the others ran); now the config is refused."""
    path = tmp_path / "n.yaml"
    path.write_text(f"matrix: [{{framework: trl, workload: gsm8k-grpo-tiny}}, {entry}]\nresults: r\nbaseline: b\n")
    path.write_text(path.read_text().replace("matrix[0]", "matrix[1]"))
    with pytest.raises(RLBenchError) as info:
        load_nightly_config(path)
    assert problem.replace("matrix[0]", "matrix[1]") in str(info.value)
    result = run_cli("nightly", "--config", str(path), cwd=tmp_path)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()  # nothing ran


def test_a_baseline_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "b").write_text("not a folder")
    path = tmp_path / "n.yaml"
    path.write_text("matrix: [{framework: trl, workload: gsm8k-grpo-tiny}]\nresults: r\nbaseline: b\n")
    with pytest.raises(RLBenchError, match="'baseline: .*' is a file, not a folder"):
        load_nightly_config(path)


def test_nightly_cli_reports_a_missing_config(tmp_path):
    result = run_cli("nightly", "--config", str(tmp_path / "absent.yaml"))
    assert (
        result.returncode == 2
        and result.stderr.startswith("error: nightly config")
        and "Traceback" not in result.stderr
    )


def test_the_workflow_runs_the_shipped_configs_on_gpu_runners():
    workflow = yaml.safe_load((PROJECT_ROOT / ".github" / "workflows" / "nightly.yml").read_text())
    job = workflow["jobs"]["benchmark"]
    assert "gpu" in job["runs-on"] and "self-hosted" in job["runs-on"]
    assert workflow[True]["schedule"][0]["cron"]  # PyYAML reads the key `on` as True
    for env in job["strategy"]["matrix"]["gpu_env"]:  # `nox -s nightly -- ENV` runs benchmarks/nightly-ENV.yaml
        assert (PROJECT_ROOT / "benchmarks" / f"nightly-{env}.yaml").is_file()
    run_step = next(s for s in job["steps"] if s.get("name", "").startswith("Run the matrix"))
    assert "nox -s nightly" in run_step["run"] and run_step["shell"] == "bash"


def _contend(record: Path, host_pct: float) -> Path:
    """The record as if measured beside other work: the host's CPU at `host_pct` % of its cores."""
    run = json.loads((record / "run.json").read_text())
    run["environment"] = {**(run.get("environment") or {}), "cpu_count": 2}
    run["summary"] = {
        **(run.get("summary") or {}),
        "cpu_util_mean_pct": {"median": host_pct, "mean": host_pct, "std": 0.0, "n": 5},
        "proc_cpu_util_mean_pct": {"median": 80.0, "mean": 80.0, "std": 0.0, "n": 5},  # the framework: 0.8 cores
    }
    (record / "run.json").write_text(json.dumps(run))
    return record


def test_a_contended_night_is_marked_and_never_becomes_the_baseline(tmp_path):
    """Other processes used 1.2 of 2 cores beside the framework: the night says so, compare says so, and
    --update-baseline refuses it; a quiet night is promoted."""
    from rlbench.harness.nightly.gate import format_night, promotion_refusal

    baseline = synthetic_record(tmp_path / "baseline" / "a", [1.0, 1.01, 0.99, 1.0, 1.02])
    tonight = _contend(synthetic_record(tmp_path / "night" / "b", [1.0, 1.0, 1.01, 0.99, 1.0]), host_pct=100.0)
    verdict = judge(tonight, tmp_path / "baseline", 0.05)
    assert verdict["contended"].startswith("host contended: other processes used 1.2 of 2 cores")
    assert "baseline_contended" not in verdict and verdict["regressed"] == []
    entry = {"framework": "trl", "workload": "gsm8k-grpo-tiny", "parallel": [], "status": "succeeded", **verdict}
    night = {"status": "passed", "benchmarks": [entry]}
    assert "ran on a shared host" in promotion_refusal(night)
    night["baseline_refused"] = promotion_refusal(night)
    assert "tonight: host contended" in format_night(night) and "baseline not updated" in format_night(night)
    assert promotion_refusal({"status": "passed", "benchmarks": [{**entry, "contended": None}]}) is None
    assert promotion_refusal({"status": "regressed", "benchmarks": []}) == "the night regressed"
    result = run_cli("compare", str(baseline), str(tonight))
    assert f"notice: {tonight}: host contended" in result.stderr


def test_the_history_lists_every_night_with_its_status_and_names_a_damaged_one(tmp_path):
    entry = {"framework": "trl", "workload": "gsm8k-grpo-tiny", "status": "succeeded", "regressed": ["step_time_s"]}
    for name, night in (
        ("20261101T020000Z-night-aaaa", {"status": "passed", "started_at": "2026-11-01", "benchmarks": []}),
        (
            "20261102T020000Z-night-bbbb",
            {"status": "regressed", "benchmarks": [entry], "baseline_refused": "the night regressed"},
        ),
    ):
        (tmp_path / name).mkdir()
        (tmp_path / name / "nightly.json").write_text(json.dumps(night))
    (tmp_path / "20261103T020000Z-night-cccc").mkdir()
    (tmp_path / "20261103T020000Z-night-cccc" / "nightly.json").write_text("{")
    headers, rows = night_rows(tmp_path)
    assert [row[0][-4:] for row in rows] == ["cccc", "bbbb", "aaaa"]  # newest first
    assert rows[0][2] == "unreadable" and rows[2][2] == "passed"
    assert rows[1][2:5] == ["regressed", "1", "trl gsm8k-grpo-tiny: step_time_s"]
    assert rows[1][6] == "refused: the night regressed"
