"""One sweep over TRL and verl on CPU, each framework in its own environment, and one report.

The CPU lanes' virtualenvs come from `nox -s verl_cpu` and `nox -s openrlhf_cpu`;
`.ci/run` builds them before the main suite and names them in $RLBENCH_LANE_ENVS
(`verl=.nox/verl_cpu,openrlhf=.nox/openrlhf_cpu`). Skipped where they are not built.
Also checks the executor's own refusals, which need no lane. OpenRLHF's lane runs the same environment executor
(`--env openrlhf=...`); its real record's trace is checked in its lane's own tests, so this sweep does not run it
a third time.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from rlbench.harness.errors import RLBenchError
from rlbench.harness.sweep.executors.environments import parse_envs
from tests.conftest import run_cli

LANES = [pair for pair in os.environ.get("RLBENCH_LANE_ENVS", "").split(",") if pair]
WORKLOAD = "gsm8k-grpo-tiny"  # float32: TRL, verl and (through its lane) OpenRLHF all train it in fp32 on CPU


def test_an_environment_without_python_is_refused_with_the_fix(tmp_path):
    with pytest.raises(RLBenchError, match=r"--env verl=.*: no Python at .*/bin/python; build the environment first"):
        parse_envs([f"verl={tmp_path}"])
    with pytest.raises(RLBenchError, match="unknown framework 'verll'"):
        parse_envs([f"verll={tmp_path}"])
    with pytest.raises(RLBenchError, match="expected FRAMEWORK=VIRTUALENV"):
        parse_envs(["verl"])


@pytest.mark.slow
@pytest.mark.skipif(len(LANES) < 2, reason="the CPU lanes are not built (.ci/run builds them: nox -s verl_cpu ...)")
def test_one_sweep_runs_trl_and_verl_on_equal_work(tmp_path, model_cache):
    envs = [arg for pair in LANES for arg in ("--env", pair)]  # paths relative to the checkout, where run_cli runs
    result = run_cli(
        "sweep",
        "--framework",
        "trl,verl",
        "--workload",
        WORKLOAD,
        "--steps",
        "2",
        "--out",
        str(tmp_path),
        *envs,
        timeout=3000,
        env={"RLBENCH_RUN_TIMEOUT_S": "1200"},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    sweep_dir = Path(result.stdout.strip().splitlines()[-1])
    index = json.loads((sweep_dir / "sweep.json").read_text())
    cells = {cell["framework"]: cell for cell in index["cells"]}
    assert {name: cell["status"] for name, cell in cells.items()} == dict.fromkeys(("trl", "verl"), "succeeded")
    records = {name: json.loads((sweep_dir / cell["record"] / "run.json").read_text()) for name, cell in cells.items()}
    # Equal work: the same workload, prompts and lengths; the lanes say what they substituted.
    assert len({json.dumps(r["workload"], sort_keys=True) for r in records.values()}) == 1
    prompts = {(sweep_dir / cells[n]["record"] / "prompts.jsonl").read_text() for n in cells}
    assert len(prompts) == 1
    assert records["trl"]["cpu_lane"] is None
    assert records["verl"]["cpu_lane"]["lane"] == "verl-cpu"
    # Every figure physically possible on this machine (CPU within its cores, PSS within its memory): real records
    # of both frameworks. (MFU is left to the unit tests: its CPU peak is this machine's probe, measured.)
    impossible = [f"{n}: {line}" for n, r in records.items() for line in r.get("data_errors", []) if "mfu" not in line]
    assert impossible == []
    report = (sweep_dir / "report.html").read_text()
    assert "CPU lanes: what these runs substituted" in report
    assert all(name in report for name in ("trl", "verl"))
    # `rlbench trace` of each framework's real record: a valid trace whose stages ran where drawn (stamped by TRL's
    # launcher, from verl's Ray timeline), with the telemetry as counters (OpenRLHF's: its lane's tests).
    from rlbench.reports.load import load_run
    from rlbench.reports.trace import build_trace
    from tests.reports.test_trace import check_trace_events

    for name, cell in cells.items():
        trace = build_trace(load_run(sweep_dir / cell["record"]))
        check_trace_events(trace)
        events = trace["traceEvents"]
        stages = [e for e in events if e.get("cat") == "stage"]
        assert stages and not any(e["args"]["placed"] for e in stages), name
        assert {e["args"]["step"] for e in events if e.get("cat") == "step"} == {1, 2}, name
        assert any(e["ph"] == "C" for e in events), name


@pytest.mark.slow
def test_a_framework_runs_in_the_environment_named_for_it(tmp_path, model_cache):
    """`--env trl=<this virtualenv>`: the TRL cell runs as that environment's `rlbench run`, into the sweep."""
    pytest.importorskip("trl")
    result = run_cli(
        "sweep",
        "--framework",
        "trl",
        "--workload",
        "gsm8k-grpo-tiny",
        "--steps",
        "2",
        "--out",
        str(tmp_path),
        "--env",
        f"trl={sys.prefix}",
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    sweep_dir = Path(result.stdout.strip().splitlines()[-1])
    cell = json.loads((sweep_dir / "sweep.json").read_text())["cells"][0]
    assert cell["status"] == "succeeded" and cell["executor"] == {
        "kind": "environment",
        "python": f"{sys.prefix}/bin/python",
    }
    assert json.loads((sweep_dir / cell["record"] / "run.json").read_text())["status"] == "succeeded"


def test_a_cell_the_environment_refuses_is_refused_before_anything_runs(tmp_path, model_cache):
    result = run_cli(
        "sweep",
        "--framework",
        "trl",
        "--workload",
        "gsm8k-ppo",
        "--steps",
        "2",
        "--out",
        str(tmp_path),
        "--env",
        f"trl={sys.prefix}",
        timeout=600,
    )
    assert result.returncode == 1
    sweep_dir = Path(result.stdout.strip().splitlines()[-1])
    cell = json.loads((sweep_dir / "sweep.json").read_text())["cells"][0]
    assert cell["status"] == "refused" and "PPO" in cell["reason"] and sys.prefix in cell["reason"]
