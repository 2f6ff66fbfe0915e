"""`rlbench trace`: a recorded run as a Chrome trace-event JSON, checked against the format's rules: every
event's phase and fields, spans inside their steps, placed stages said to be placed, counters numeric."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pandas as pd
import pytest

from rlbench.reports.load import load_run
from rlbench.reports.trace import NCCL_PID, STEPS_PID, build_trace
from tests.conftest import run_cli

RECORD = Path(__file__).parents[1] / "data" / "records" / "trl-tiny"
PHASES = {"X", "C", "i", "M"}


def check_trace_events(trace: dict) -> None:
    """The trace-event format's rules (Google's "Trace Event Format" document) as far as Perfetto enforces them."""
    json.dumps(trace, allow_nan=False)  # NaN or inf is not JSON: the viewers refuse the whole file
    assert isinstance(trace["traceEvents"], list) and trace["displayTimeUnit"] in ("ms", "ns")
    for event in trace["traceEvents"]:
        assert event["ph"] in PHASES, event
        assert isinstance(event["name"], str) and isinstance(event["pid"], int) and isinstance(event["tid"], int)
        if event["ph"] == "M":
            assert event["name"] in ("process_name", "process_sort_index", "thread_name") and "args" in event
            continue
        assert isinstance(event["ts"], (int, float)) and event["ts"] >= 0, event
        if event["ph"] == "X":
            assert isinstance(event["dur"], (int, float)) and event["dur"] >= 0
        if event["ph"] == "C":
            assert event["args"] and all(isinstance(v, (int, float)) for v in event["args"].values())
        if event["ph"] == "i":
            assert event["s"] in ("t", "p", "g")
    spans: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for event in trace["traceEvents"]:
        if event["ph"] == "X":
            spans.setdefault((event["pid"], event["tid"]), []).append((event["ts"], event["ts"] + event["dur"]))
    for thread, found in spans.items():  # one thread's spans nest or follow each other, never cross
        open_ends: list[float] = []
        for begin, end in sorted(found, key=lambda span: (span[0], -span[1])):
            while open_ends and open_ends[-1] <= begin + 1:  # 1 us: float rounding of back-to-back spans
                open_ends.pop()
            assert not open_ends or end <= open_ends[-1] + 1, f"spans cross on thread {thread}: ends {open_ends}, {end}"
            open_ends.append(end)


def test_a_recorded_trl_run_becomes_a_valid_trace_with_steps_stages_and_counters():
    trace = build_trace(load_run(RECORD))
    check_trace_events(trace)
    events = trace["traceEvents"]
    steps = [e for e in events if e["ph"] == "X" and e.get("cat") == "step"]
    stages = [e for e in events if e["ph"] == "X" and e.get("cat") == "stage"]
    assert [e["args"]["step"] for e in steps] == [1, 2, 3] and steps[0]["name"] == "step 1 (warm-up)"
    assert {e["name"] for e in stages} >= {"gen", "update_actor"}
    for stage in stages:  # inside its step, and said to be placed
        step = next(s for s in steps if s["args"]["step"] == stage["args"]["step"])
        assert step["ts"] <= stage["ts"] and stage["ts"] + stage["dur"] <= step["ts"] + step["dur"] + 1
        assert stage["args"]["placed"] is True and stage["pid"] == STEPS_PID
    counters = {e["name"] for e in events if e["ph"] == "C"}
    assert {"host CPU (% of all cores)", "framework CPU (% of one core)", "memory (GB)"} <= counters
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert "trl steps" in names and sum(n.startswith("node ") for n in names) == 1  # a one-node run
    assert trace["otherData"]["framework"] == "trl"


def test_collectives_become_instant_events_per_process():
    run = load_run(RECORD)
    start = float(run.steps["step_start_unix_s"].dropna().iloc[0])
    comm = pd.DataFrame(
        {
            "time_unix_s": [start + 0.1, start + 0.2, start + 0.3],
            "host": ["a", "a", "b"],
            "pid": [11, 11, 12],
            "op": ["AllReduce", "AllGather", "AllReduce"],
            "rank": [0, 0, 1],
            "nranks": [2, 2, 2],
            "bytes": [4096.0, 8192.0, float("nan")],
            "total_bytes": [8192.0, 16384.0, 8192.0],
        }
    )
    trace = build_trace(dataclasses.replace(run, comm=comm))
    check_trace_events(trace)
    calls = [e for e in trace["traceEvents"] if e["ph"] == "i"]
    assert [c["name"] for c in calls] == ["AllReduce", "AllGather", "AllReduce"] and {c["pid"] for c in calls} == {
        NCCL_PID
    }
    assert len({c["tid"] for c in calls}) == 2 and "bytes" not in calls[2]["args"]  # NaN left out, not written


def test_the_command_writes_a_trace_and_never_into_the_record(tmp_path):
    out = tmp_path / "run.trace.json"
    result = run_cli("trace", str(RECORD), "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert "spans" in result.stdout and str(out) in result.stdout
    check_trace_events(json.loads(out.read_text()))
    assert run_cli("trace", str(RECORD), "--out", str(out)).returncode == 0  # a trace may be replaced
    inside = run_cli("trace", str(RECORD), "--out", str(RECORD / "x.trace.json"))
    assert inside.returncode == 2 and "inside the run record" in inside.stderr
    precious = tmp_path / "notes.txt"
    precious.write_text("keep me")
    refused = run_cli("trace", str(RECORD), "--out", str(precious))
    assert refused.returncode == 2 and precious.read_text() == "keep me"
    missing = run_cli("trace", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "not a run record folder" in missing.stderr


@pytest.mark.parametrize("field", ["steps", "telemetry"])
def test_a_record_missing_a_table_still_gives_a_valid_trace(field):
    trace = build_trace(dataclasses.replace(load_run(RECORD), **{field: None}))
    check_trace_events(trace)
    assert trace["traceEvents"]


def test_stamped_stage_calls_are_drawn_where_they_ran_not_placed():
    run = load_run(RECORD)
    first = run.steps.dropna(subset=["step_start_unix_s"]).iloc[0]
    start = float(first["step_start_unix_s"])
    spans = pd.DataFrame(
        {
            "step": [int(first["step"])] * 2,
            "stage": ["gen", "gen"],  # two generation calls of one step, with a gap between them
            "start_unix_s": [start + 0.01, start + 0.05],
            "end_unix_s": [start + 0.02, start + 0.06],
        }
    )
    trace = build_trace(dataclasses.replace(run, spans=spans))
    check_trace_events(trace)
    stages = [e for e in trace["traceEvents"] if e.get("cat") == "stage"]
    assert [round(e["ts"] - stages[0]["ts"]) for e in stages] == [0, 40000] and not stages[0]["args"]["placed"]


def test_stages_that_run_at_once_get_a_thread_each():
    """verl scores responses while others still decode: its reward span starts inside its gen span and ends after
    it, which one thread of the trace-event format cannot hold."""
    run = load_run(RECORD)
    first = run.steps.dropna(subset=["step_start_unix_s"]).iloc[0]
    start = float(first["step_start_unix_s"])
    spans = pd.DataFrame(
        {
            "step": [int(first["step"])] * 2,
            "stage": ["gen", "reward"],
            "start_unix_s": [start + 0.01, start + 0.03],
            "end_unix_s": [start + 0.05, start + 0.07],
        }
    )
    trace = build_trace(dataclasses.replace(run, spans=spans))
    check_trace_events(trace)
    stages = {e["name"]: e for e in trace["traceEvents"] if e.get("cat") == "stage"}
    assert stages["gen"]["tid"] != stages["reward"]["tid"]
    threads = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert threads[stages["reward"]["tid"]] == "stage: reward"


@pytest.mark.parametrize(
    "damage",
    [
        {"launched_unix_s": float("inf")},
        {"launched_unix_s": 1e300},
        {"step_start_unix_s": 1e300},
        {"step_start_unix_s": float("inf")},
    ],
)
def test_a_time_out_of_range_costs_its_events_not_the_trace(damage):
    """A damaged record (an infinite or absurd launch, a step that starts at 1e300) still gives a valid trace:
    the launch falls back to the first plausible time, and events whose times JSON cannot hold are left out
    and counted, never a ValueError from the JSON writer."""
    run = load_run(RECORD)
    if "launched_unix_s" in damage:
        run = dataclasses.replace(run, record={**run.record, **damage})
    else:
        steps = run.steps.copy()
        steps.loc[steps.index[-1], "step_start_unix_s"] = damage["step_start_unix_s"]
        run = dataclasses.replace(run, steps=steps)
    trace = build_trace(run)
    check_trace_events(trace)
    assert trace["traceEvents"] and trace["otherData"]["origin_unix_s"] < 1e11


def test_a_huge_file_at_out_is_read_no_further_than_its_first_bytes(tmp_path, monkeypatch):
    """Deciding whether --out holds a trace reads its first 64 bytes, not the file (a big file was a MemoryError)."""
    from rlbench.reports import trace_file

    big = tmp_path / "big.bin"
    with big.open("wb") as handle:  # sparse: 8 GiB long, a few blocks on disk
        handle.truncate(8 * 2**30)
    whole = Path.read_bytes
    monkeypatch.setattr(
        Path, "read_bytes", lambda self: pytest.fail(f"read all of {self}") if self == big else whole(self)
    )
    with pytest.raises(Exception, match="exists and is not a trace"):
        trace_file.write_trace(RECORD, big)
