"""`rlbench run --profile torch --profile-steps A-B`: one switch for every framework, a real torch.profiler trace
of TRL's chosen steps in the record with its overhead, and one-line refusals where it is not mapped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlbench.harness.errors import RLBenchError
from rlbench.harness.record.read import read_record
from rlbench.harness.spec.profile import parse_profile
from tests.conftest import run_cli


def test_the_request_is_checked_against_the_runs_steps():
    assert parse_profile(None, None, steps=4, warmup=1) is None
    assert parse_profile("torch", None, steps=4, warmup=1).to_dict() == {"tool": "torch", "steps": [2, 2]}
    assert parse_profile("torch", "2-3", steps=4, warmup=1).to_dict() == {"tool": "torch", "steps": [2, 3]}
    for tool, steps, message in [
        ("perf", "2", "must be one of torch, nsys"),
        ("torch", "3-2", "within the run's steps 1-4"),
        ("torch", "5", "within the run's steps 1-4"),
        ("torch", "two", "give a step or a range"),
        (None, "2", "needs --profile"),
    ]:
        with pytest.raises(RLBenchError, match=message):
            parse_profile(tool, steps, steps=4, warmup=1)


@pytest.mark.slow
def test_trl_writes_a_torch_trace_of_the_chosen_steps_and_its_overhead(tmp_path, model_cache):
    pytest.importorskip("trl")
    result = run_cli(
        "run",
        "--framework",
        "trl",
        "--workload",
        "gsm8k-grpo-tiny",
        "--steps",
        "4",
        "--out",
        str(tmp_path),
        "--profile",
        "torch",
        "--profile-steps",
        "2-2",
    )
    assert result.returncode == 0, result.stderr
    run_dir = Path(result.stdout.strip().splitlines()[-1])
    record = read_record(run_dir)
    profile = record["profile"]
    assert profile["tool"] == "torch" and profile["steps"] == [2, 2]
    assert profile["files"] == ["profile/torch-steps-2-2-rank0.json"] and "profile" in record["files"]
    trace = json.loads((run_dir / profile["files"][0]).read_text())
    names = {event.get("name", "") for event in trace["traceEvents"]}
    assert any(name.startswith("aten::") for name in names)  # the CPU activities of the profiled step
    # the same run's stages, stamped by the launcher: spans.parquet, drawn where they ran in the trace
    from rlbench.reports.load import load_run
    from rlbench.reports.trace import build_trace

    run = load_run(run_dir)
    assert run.spans is not None and set(run.spans["step"]) == {1, 2, 3, 4}
    assert {"gen", "update_actor"} <= set(run.spans["stage"])
    stages = [e for e in build_trace(run)["traceEvents"] if e.get("cat") == "stage"]
    assert stages and not any(e["args"]["placed"] for e in stages)
    overhead = profile["overhead"]
    assert overhead["n_profiled"] == 1 and overhead["n_other"] == 1  # step 4 (step 3 pays the export)
    assert overhead["ratio"] == pytest.approx(overhead["profiled_median_s"] / overhead["other_median_s"])


@pytest.mark.parametrize(
    ("framework", "tool", "message"),
    [
        ("trl", "nsys", "maps --profile torch only"),
        ("verl", "nsys", "--profile nsys: "),  # no GPU here: the CPU lane's refusal, or no nsys on PATH
    ],
)
def test_an_unmapped_profiler_is_refused_before_launch(tmp_path, framework, tool, message):
    result = run_cli(
        "run", "--framework", framework, "--workload", "gsm8k-grpo-tiny", "--out", str(tmp_path), "--profile", tool
    )
    assert result.returncode == 2 and message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())  # nothing launched, no record
