"""`rlbench sweep`: grid expansion, the index, resume, spread, and real local sweeps of TRL tiny runs.

The fast tests drive the sweep loop with a scripted executor; the slow ones run
`rlbench sweep` as a user would: a 2x2 grid with refused cells and one injected
crash (a model folder without weights, as in test_e2e_trl), and a sweep stopped
with Ctrl-C and resumed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from rlbench.harness.errors import RLBenchError
from rlbench.harness.perfmodel.sweep import LAYOUT_AXES
from rlbench.harness.record.read import read_record, read_run_json
from rlbench.harness.record.run_record import write_run_json
from rlbench.harness.record.spread import format_summary, group_spread, spread
from rlbench.harness.record.sweep_index import INDEX_FILE, create_sweep_dir, load_index, locked
from rlbench.harness.spec.parallel import parse_grid
from rlbench.harness.sweep.driver import SweepInterrupted, SweepRequest, check_resume, expand, run, start
from rlbench.harness.sweep.executors.executor import RunResult, failure
from rlbench.harness.sweep.executors.record_transfer import pack, strip_blocks, unpack
from rlbench.workloads.catalog import WORKLOAD_DIR
from tests.conftest import PROJECT_ROOT, run_cli

TINY = "gsm8k-grpo-tiny"


def test_parse_grid():
    """One `KNOB=V1,V2` parser serves `sweep --grid` and `predict --sweep` (which also takes `all`)."""
    assert parse_grid(["rollout_tp=1,2,4", "placement=colocated, disaggregated"]) == (
        {"rollout_tp": ["1", "2", "4"], "placement": ["colocated", "disaggregated"]},
        False,
    )
    with pytest.raises(RLBenchError, match="unknown knob 'tpp'; did you mean 'tp'"):
        parse_grid(["tpp=1,2"])
    for bad in (["tp="], ["tp=1", "tp=2"], ["all"]):
        with pytest.raises(RLBenchError, match="expected KNOB=V1,V2 once per knob"):
            parse_grid(bad)
    sweep = {"flag": "--sweep", "knobs": LAYOUT_AXES, "word": "all"}
    assert parse_grid(["all", "tp=2"], **sweep) == ({"tp": ["2"]}, True)
    for bad in (["dp=2"], ["tp=1", "tp=2"]):
        with pytest.raises(RLBenchError, match=f"--sweep '{bad[-1]}': expected all, or KNOB=V1,V2 once per knob"):
            parse_grid(bad, **sweep)


def test_expand_runs_repeats_outermost_and_merges_fixed_knobs():
    request = SweepRequest(
        frameworks=("trl", "verl"), workloads=(TINY,), grid={"rollout_tp": ["1", "2"]}, parallel=("dp=2",), repeats=2
    )
    cells = expand(request)
    assert len(cells) == 8 and [c["id"] for c in cells[:2]] == ["c000", "c001"]
    assert [c["repeat"] for c in cells] == [1] * 4 + [2] * 4
    assert cells[1] == {**cells[1], "framework": "trl", "parallel": {"dp": "2", "rollout_tp": "2"}, "status": "pending"}
    with pytest.raises(RLBenchError, match="both fixed .* and swept"):
        SweepRequest(frameworks=("trl",), workloads=(TINY,), grid={"dp": ["1"]}, parallel=("dp=2",))
    assert SweepRequest.from_dict(json.loads(json.dumps(request.to_dict()))) == request


def test_sweep_folders_are_unique_and_locked(tmp_path):
    first, second = create_sweep_dir(tmp_path), create_sweep_dir(tmp_path)
    assert first != second and first.parent == second.parent == tmp_path
    with locked(first):
        with pytest.raises(RLBenchError, match="being run by another process"):
            with locked(first):
                pass
        with locked(second):  # another sweep's folder is independent
            pass
    with locked(first):  # released on exit
        pass


def test_spread_and_groups():
    assert spread([1.0, 2.0, 3.0]) == {"n": 3, "mean": 2.0, "std": 1.0, "min": 1.0, "max": 3.0, "cv": 0.5}
    assert spread([4.0])["std"] == 0.0 and spread([])["mean"] is None
    cells = [
        {
            "id": f"c{i}",
            "framework": "trl",
            "workload": TINY,
            "parallel": {"dp": "1"},
            "repeat": i + 1,
            "status": "succeeded",
            "reason": None,
            "record": f"r{i}",
        }
        for i in range(3)
    ]
    cells.append(
        {
            "id": "c3",
            "framework": "trl",
            "workload": TINY,
            "parallel": {"dp": "2"},
            "repeat": 1,
            "status": "refused",
            "reason": "needs 2 GPUs",
            "record": None,
        }
    )
    summaries = {
        f"c{i}": {"wall_step_time_s": {"median": t, "unit": "s", "direction": "lower"}}
        for i, t in enumerate([1.0, 1.2, 1.4])
    }
    groups = group_spread(cells, summaries)
    assert len(groups) == 2 and groups[0]["statuses"] == {"succeeded": 3}
    assert groups[0]["metrics"]["wall_step_time_s"]["mean"] == pytest.approx(1.2)
    assert groups[0]["metrics"]["wall_step_time_s"]["std"] == pytest.approx(0.2)
    text = format_summary({"sweep_id": "s", "cells": cells, "groups": groups})
    assert "3/3: 1.2 +- 0.2 s (n=3, cv 16.7%)" in text and "refused: trl gsm8k-grpo-tiny dp=2: needs 2 GPUs" in text


def test_record_travels_through_a_log(tmp_path):
    run_dir = tmp_path / "job" / "20260101T000000Z-trl-x-abc123"
    run_dir.mkdir(parents=True)
    write_run_json(run_dir, {"run_id": run_dir.name, "status": "succeeded"})
    (run_dir / "framework.log").write_text("hello\n")
    log = "step 1/2\n" + pack(run_dir) + "\ndone\n"
    assert strip_blocks(log) == ["step 1/2", "done"]
    dest = tmp_path / "sweep"
    dest.mkdir()
    copied = unpack(log, dest)
    assert copied == dest / run_dir.name and (copied / "framework.log").read_text() == "hello\n"
    assert read_run_json(copied)["status"] == "succeeded" and sorted(p.name for p in dest.iterdir()) == [run_dir.name]
    with pytest.raises(OSError):  # never merged into an existing record
        unpack(log, dest)
    assert unpack("no record here\n", dest) is None


class ScriptedExecutor:
    """Returns scripted outcomes; 'ctrl-c' raises KeyboardInterrupt as a user's Ctrl-C would."""

    kind = "local"

    def __init__(self, script: list[str]):
        self.script, self.ran = list(script), []

    def check(self, spec, run_args=None):
        if spec.parallel.placement == "disaggregated":
            raise RLBenchError("refused: colocated only")

    def run(self, spec, run_args, echo):
        self.ran.append(run_args)
        outcome = self.script.pop(0)
        if outcome == "ctrl-c":
            raise KeyboardInterrupt
        record = spec.out / f"rec-{id(self)}-{len(self.ran)}"
        record.mkdir()
        write_run_json(record, {"status": outcome, "summary": {}})
        if outcome == "succeeded":
            return RunResult("succeeded", record, None, {"kind": "local"})
        return RunResult(
            "failed", record, failure("oom", "CUDA out of memory", ["x", "CUDA out of memory"]), {"kind": "local"}
        )


def test_failures_are_recorded_and_interrupted_sweeps_resume(tmp_path):
    request = SweepRequest(
        frameworks=("trl",),
        workloads=(TINY,),
        grid={"placement": ["colocated", "disaggregated"], "dp": ["1", "2"]},
        steps=2,
    )
    first = ScriptedExecutor(["failed", "ctrl-c"])
    sweep_dir = start(request, first, tmp_path)
    with pytest.raises(SweepInterrupted, match=f"--resume {sweep_dir}"):
        run(sweep_dir, first, echo=lambda line: None)
    index = load_index(sweep_dir)
    assert index["status"] == "interrupted"
    assert [c["status"] for c in index["cells"]] == ["failed", "interrupted", "refused", "refused"]
    failed = index["cells"][0]
    assert failed["error"]["kind"] == "oom" and failed["error"]["log_tail"][-1] == "CUDA out of memory"
    assert failed["reason"] == "oom: CUDA out of memory" and (sweep_dir / failed["record"]).is_dir()
    assert index["cells"][2]["reason"] == "refused: colocated only"
    assert first.ran[1] == [
        "--framework",
        "trl",
        "--workload",
        TINY,
        "--seed",
        "0",
        "--steps",
        "2",
        "--parallel",
        "placement=colocated",
        "--parallel",
        "dp=2",
    ]

    with pytest.raises(RLBenchError, match="options differ"):
        check_resume(sweep_dir, SweepRequest(frameworks=("trl",), workloads=(TINY,)))
    assert check_resume(sweep_dir, request) == request
    second = ScriptedExecutor(["succeeded"])
    index = run(sweep_dir, second, echo=lambda line: None)
    assert len(second.ran) == 1 and index["status"] == "finished"  # only the interrupted cell ran again
    assert [c["status"] for c in index["cells"]] == ["failed", "succeeded", "refused", "refused"]
    assert index["cells"][0]["record"] == failed["record"]  # finished cells untouched


def test_a_failing_report_never_fails_the_sweep(tmp_path, monkeypatch):
    import rlbench.reports.html
    from rlbench.harness.sweep.driver import final_report

    def broken(paths, out, **options):
        raise ValueError("no figures")

    monkeypatch.setattr(rlbench.reports.html, "render_report", broken)
    warnings: list[str] = []
    index = {"cells": [{"record": "r1"}]}
    assert final_report(tmp_path, index, warnings.append) is None
    assert warnings == ["warning: the comparison report failed (ValueError: no figures); the records are intact"]
    assert final_report(tmp_path, {"cells": [{"record": None}]}, warnings.append) is None  # nothing to report


def test_the_sweep_report_lists_refused_cells_beside_the_runs(tmp_path):
    """Refused cells are in the report too, not only on the console and in sweep.json."""
    import shutil

    from rlbench.harness.sweep.driver import final_report
    from tests.conftest import PROJECT_ROOT

    shutil.copytree(PROJECT_ROOT / "tests" / "data" / "records" / "trl-tiny", tmp_path / "r1")
    index = {
        "cells": [
            {"record": "r1", "status": "succeeded"},
            {
                "record": None,
                "status": "refused",
                "framework": "trl",
                "workload": TINY,
                "parallel": {"dp": "2"},
                "reason": "--parallel dp=2: needs 2 GPUs, this machine has 0",
            },
        ]
    }
    report = final_report(tmp_path, index, print)
    html = report.read_text()
    assert "Runs that did not finish" in html and f"trl {TINY} dp=2" in html
    assert "--parallel dp=2: needs 2 GPUs, this machine has 0" in html


def test_gpus_asked_of_ray():
    from rlbench.harness.spec.parallel import parse_parallel
    from rlbench.harness.spec.runspec import RunSpec
    from rlbench.harness.sweep.executors.ray_executor import entrypoint_gpus
    from rlbench.workloads.catalog import load_workload

    def gpus(framework: str, workload: str) -> int:
        return entrypoint_gpus(
            RunSpec(
                framework=framework, workload=load_workload(workload), parallel=parse_parallel(["dp=4", "rollout_tp=2"])
            )
        )

    assert gpus("trl", "gsm8k-grpo") == 4 and gpus("trl", TINY) == 0
    assert gpus("verl", "gsm8k-grpo") == 0  # Ray-based: its own placement groups reserve the GPUs


def test_sweep_help_imports_no_ray_or_framework():
    code = (
        "import sys, rlbench.harness.cli\nfrom click.testing import CliRunner\n"
        "assert CliRunner().invoke(rlbench.harness.cli.main, ['sweep', '--help']).exit_code == 0\n"
        "print([m for m in ('ray', 'torch', 'trl', 'transformers') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_two_sweeps_into_one_folder_do_not_clash(tmp_path):
    # Both sweeps are all refused, so this costs two CLI start-ups and no framework run.
    args = [
        sys.executable,
        "-m",
        "rlbench.harness",
        "sweep",
        "--framework",
        "trl",
        "--workload",
        TINY,
        "--grid",
        "placement=disaggregated",
        "--grid",
        "dp=1,2",
        "--out",
        str(tmp_path),
    ]
    procs = [
        subprocess.Popen(args, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [1, 1]  # nothing ran: not a successful sweep
    dirs = sorted(Path(out.strip().splitlines()[-1]) for out, _ in outputs)
    assert len(set(dirs)) == 2 and sorted(tmp_path.iterdir()) == dirs
    for sweep_dir in dirs:
        index = load_index(sweep_dir)
        assert index["sweep_id"] == sweep_dir.name and [c["status"] for c in index["cells"]] == ["refused"] * 2
    assert (
        "refused: trl gsm8k-grpo-tiny placement=disaggregated dp=1: --parallel placement=disaggregated" in outputs[0][1]
    )


# ---- real sweeps of TRL tiny runs (slow) ----


def _broken_workload(tmp_path: Path) -> Path:
    """gsm8k-grpo-tiny with a model folder whose weights are gone: TRL itself crashes on load."""
    import shutil

    from rlbench.harness.spec.inputs import prepare_inputs
    from rlbench.workloads.catalog import load_workload

    broken = tmp_path / "broken-model"
    shutil.copytree(prepare_inputs(load_workload(TINY), 0).model, broken)
    (broken / "model.safetensors").unlink()
    mapping = yaml.safe_load((WORKLOAD_DIR / f"{TINY}.yaml").read_text())
    mapping["include"] = [str(WORKLOAD_DIR / name) for name in mapping["include"]]
    path = tmp_path / "broken.yaml"
    path.write_text(
        yaml.safe_dump(mapping | {"name": "broken", "model": {"name": str(broken), "dtype": "float32", "tiny": None}})
    )
    return path


@pytest.fixture(scope="module")
def local_sweep(tmp_path_factory, model_cache):
    pytest.importorskip("trl")
    work = tmp_path_factory.mktemp("sweep")
    result = run_cli(
        "sweep",
        "--framework",
        "trl",
        "--workload",
        f"{TINY},{_broken_workload(work)}",
        "--grid",
        "placement=colocated,disaggregated",
        "--steps",
        "2",
        "--out",
        str(work / "results"),
    )
    return Path(result.stdout.strip().splitlines()[-1]), result


@pytest.mark.slow
def test_local_sweep_records_runs_refusals_and_failures(local_sweep):
    sweep_dir, result = local_sweep
    assert result.returncode == 1, result.stderr  # one run failed
    index = load_index(sweep_dir)
    cells = {(Path(c["workload"]).stem, c["parallel"]["placement"]): c for c in index["cells"]}
    assert index["status"] == "finished" and len(cells) == 4
    ok, crashed = cells[(TINY, "colocated")], cells[("broken", "colocated")]
    assert cells[(TINY, "disaggregated")]["status"] == cells[("broken", "disaggregated")]["status"] == "refused"
    assert "TRL adapter runs vLLM colocated only" in cells[(TINY, "disaggregated")]["reason"]
    assert ok["status"] == "succeeded" and read_record(sweep_dir / ok["record"])["steps"]["step"].tolist() == [1, 2]
    assert crashed["status"] == "failed" and crashed["error"]["kind"] == "framework_error"
    assert crashed["error"]["log_tail"] and read_record(sweep_dir / crashed["record"])["status"] == "failed"
    assert sorted(p.name for p in sweep_dir.iterdir() if p.is_dir()) == sorted([ok["record"], crashed["record"]])
    assert f"report: {sweep_dir / 'report.html'}" in result.stdout and (sweep_dir / "report.html").stat().st_size
    assert index["groups"][0]["metrics"]["wall_step_time_s"]["n"] == 1
    assert "refused: trl gsm8k-grpo-tiny placement=disaggregated" in result.stderr
    assert "failed: c002" in result.stdout and "framework_error" in result.stdout
    assert "Traceback" not in result.stderr.split("framework.log")[0]


def _wait_for(predicate, timeout_s: float, what: str):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _index(out: Path) -> dict | None:
    found = list(out.glob(f"*/{INDEX_FILE}"))
    return json.loads(found[0].read_text()) if found else None


@pytest.mark.slow
def test_ctrl_c_keeps_finished_records_and_resume_finishes(tmp_path, model_cache):
    pytest.importorskip("trl")
    out = tmp_path / "results"
    sweep = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rlbench.harness",
            "sweep",
            "--framework",
            "trl",
            "--workload",
            TINY,
            "--steps",
            "2",
            "--repeats",
            "2",
            "--out",
            str(out),
        ],
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # a shell's Ctrl-C, even under nohup

    def second_run_started():
        index = _index(out)
        if not index or index["cells"][1]["status"] != "running":
            return None
        sweep_dir = out / index["sweep_id"]
        # The framework has written to its log: it is running, not starting.
        return [
            p
            for p in sweep_dir.glob("*/framework.log")
            if p.parent.name != index["cells"][0]["record"] and p.stat().st_size > 0
        ]

    _wait_for(second_run_started, 240, "the second run to start")
    sweep.send_signal(signal.SIGINT)
    stdout, stderr = sweep.communicate(timeout=120)
    assert sweep.returncode == 130, stderr
    assert "rlbench sweep --resume" in stderr and "Traceback" not in stderr
    index = _index(out)
    sweep_dir = out / index["sweep_id"]
    first, second = index["cells"]
    assert index["status"] == "interrupted" and first["status"] == "succeeded" and second["status"] == "interrupted"
    assert read_record(sweep_dir / second["record"])["status"] == "interrupted"
    kept = (sweep_dir / first["record"] / "run.json").stat().st_mtime_ns

    result = run_cli("sweep", "--resume", str(sweep_dir))
    assert result.returncode == 0, result.stderr
    assert "1 to run" in result.stderr
    index = load_index(sweep_dir)
    first_after, second_after = index["cells"]
    assert first_after == first and (sweep_dir / first["record"] / "run.json").stat().st_mtime_ns == kept
    assert second_after["status"] == "succeeded" and second_after["previous_records"] == [second["record"]]
    assert (sweep_dir / second["record"]).is_dir()  # the interrupted attempt is kept
    step_time = index["groups"][0]["metrics"]["wall_step_time_s"]
    assert step_time["n"] == 2 and step_time["std"] >= 0 and "(n=2, cv" in result.stdout


def test_an_index_from_before_trainer_tp_resumes_its_rollout_tp(tmp_path):
    from rlbench.harness.record.sweep_index import INDEX_FILE, SWEEP_SCHEMA_VERSION, load_index

    cell = {
        "id": "c000",
        "framework": "trl",
        "workload": "gsm8k-grpo-tiny",
        "repeat": 0,
        "parallel": {"tp": 2, "dp": 1},
        "status": "pending",
        "record": None,
        "previous_records": [],
    }
    old = {
        "schema_version": 1,
        "sweep_id": "s",
        "status": "interrupted",
        "cells": [cell],
        "request": {
            "frameworks": ["trl"],
            "workloads": ["gsm8k-grpo-tiny"],
            "grid": {"tp": ["1", "2"]},
            "parallel": ["tp=2", "dp=1"],
        },
    }
    (tmp_path / INDEX_FILE).write_text(json.dumps(old))
    index = load_index(tmp_path)
    assert index["schema_version"] == SWEEP_SCHEMA_VERSION
    assert index["cells"][0]["parallel"] == {"rollout_tp": 2, "dp": 1}  # version 1's tp was the rollout's
    assert index["request"]["grid"] == {"rollout_tp": ["1", "2"]}
    assert index["request"]["parallel"] == ["rollout_tp=2", "dp=1"]


def test_a_grid_too_large_is_refused_by_count_before_any_cell_exists():
    from rlbench.harness.sweep.driver import MAX_CELLS

    values = [str(v) for v in range(1, 1001)]
    started = time.monotonic()
    with pytest.raises(RLBenchError, match=r"1,000,000 cells .* more than the 10,000 one sweep may hold; split it"):
        SweepRequest(frameworks=("trl",), workloads=("gsm8k-grpo-tiny",), grid={"dp": values, "tp": values})
    assert time.monotonic() - started < 5  # counted, not expanded
    assert SweepRequest(frameworks=("trl",), workloads=("w",), grid={"dp": values}, repeats=10).cell_count == MAX_CELLS
