"""One run as a Chrome trace-event JSON (the format Perfetto's UI and chrome://tracing open offline).

Tracks, each a process of the trace:
* "steps": one span per step, from the record's step boundaries (the framework's own stamps where it
  wrote them, the runner's poll otherwise: run.json says which), and under it one span per stage the
  framework timed, exactly as the report's timeline draws them (`rlbench.reports.timeline.stage_bars`):
  where the record has spans.parquet (TRL's launcher stamps each stage call) at their real start and
  end; elsewhere frameworks log how long a stage took, not when it began, so stages are placed end to
  end from the step's start in pipeline order and each such span says `placed: true` and why.
* one track per node (a one-node run has one), with counters from rlbench's telemetry: the host's CPU,
  the framework's process tree's CPU, its resident and proportional memory and the host's used memory;
  with GPUs, one counter group per device (utilisation, board power, memory).
* "NCCL" (where RLBENCH_NCCL_LOG=1 logged collectives): one instant event per collective call on a track
  per (host, process), with its op, bytes and rank.

Times are microseconds from the run's launch (run.json `launched_unix_s`, else its first event); the
unix time of that origin is in `otherData`. The trace is a pure function of the record.

    from rlbench.reports.trace import build_trace
    trace = build_trace(load_run(Path("results/<run>")))   # {"traceEvents": [...], ...}
"""

from __future__ import annotations

import math
from typing import Any

from rlbench.reports.load import RunView
from rlbench.reports.timeline import stage_bars

PLACED = "frameworks log a stage's duration, not its start: placed end to end from the step's start"
STEPS_PID, NCCL_PID, NODE_PID = 1, 2, 10  # node tracks are NODE_PID, NODE_PID + 1, ...

# Telemetry counters per node: (counter name, {series name: column}).
HOST_COUNTERS = (
    ("host CPU (% of all cores)", {"host": "cpu_util_pct"}),
    ("framework CPU (% of one core)", {"process tree": "proc_cpu_util_pct"}),
    ("memory (GB)", {"tree RSS": "proc_rss_gb", "tree PSS": "proc_pss_gb", "host used": "host_mem_used_gb"}),
)
GPU_COUNTERS = (
    ("utilisation (%)", "gpu_util_pct"),
    ("power (W)", "power_w"),
    ("memory (GB)", "mem_used_gb"),
)


# Unix times a record may hold: from 1970 to about the year 5000 (a damaged record's 1e300 is none).
LATEST_UNIX_S = 1e11


def _finite(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def _unix_time(value: Any) -> float | None:
    """A plausible unix time, or None."""
    number = _finite(value)
    return number if number is not None and 0.0 <= number <= LATEST_UNIX_S else None


def _writable(event: dict[str, Any]) -> bool:
    """Whether every number of the event (its times, its counters' values) is one JSON can hold."""
    numbers = [event.get("ts"), event.get("dur"), *(event.get("args") or {}).values()]
    return all(_finite(v) is not None for v in numbers if isinstance(v, (int, float)) and not isinstance(v, bool))


def _origin(run: RunView) -> float | None:
    """The run's launch, or the earliest time any table holds."""
    launched = _unix_time(run.record.get("launched_unix_s"))
    if launched is not None:
        return launched
    times: list[float] = []
    for table, column in ((run.steps, "step_start_unix_s"), (run.telemetry, "time_unix_s"), (run.comm, "time_unix_s")):
        if table is not None and column in table:
            times += [t for t in (_unix_time(v) for v in table[column]) if t is not None]
    return min(times) if times else None


def _meta(pid: int, name: str, sort: int, tid: int | None = None, thread: str | None = None) -> list[dict[str, Any]]:
    events = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}},
        {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": sort}},
    ]
    if tid is not None:
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": thread}})
    return events


def _step_events(run: RunView, us: Any) -> list[dict[str, Any]]:
    bars = stage_bars(run)
    if bars is None or bars.empty:
        return []
    boundaries = (run.record.get("telemetry") or {}).get("step_windows") or "the record's step boundaries"
    events = _meta(STEPS_PID, f"{run.record['framework']['name']} steps", 0, 1, "step")
    measured = "placed" in bars and not bars["placed"].fillna(True).astype(bool).all()
    # Stamped stages can run at once (verl scores responses while others still decode): a thread per stage, as
    # the trace-event format nests the spans of one thread. Placed stages are end to end: one thread holds them.
    names = [str(stage) for stage in dict.fromkeys(bars["stage"]) if stage != "step"]
    threads = {name: 2 + i for i, name in enumerate(names)} if measured else dict.fromkeys(names, 2)
    labels = {tid: f"stage: {name}" for name, tid in threads.items()} if measured else {2: "stages (placed)"}
    for tid, label in labels.items():
        events.append({"ph": "M", "name": "thread_name", "pid": STEPS_PID, "tid": tid, "args": {"name": label}})
    for _, bar in bars.iterrows():
        start, end = float(bar["start_s"]), float(bar["end_s"])
        common = {"ts": us(start), "dur": max(0.0, (end - start) * 1e6), "pid": STEPS_PID, "ph": "X"}
        if bar["stage"] == "step":
            events.append(
                {
                    **common,
                    "tid": 1,
                    "name": f"step {int(bar['step'])}" + (" (warm-up)" if bar["warmup"] else ""),
                    "cat": "step",
                    "args": {"step": int(bar["step"]), "wall_s": end - start, "boundaries": str(boundaries)},
                }
            )
        else:
            placed = bool(bar.get("placed", True))
            args = {"step": int(bar["step"]), "seconds": float(bar["seconds"]), "placed": placed}
            if placed:
                args["why"] = PLACED
            if bool(bar.get("clipped", False)):
                args["clipped"] = "cut at the step's end: the stages add up to more than its window"
            events.append(
                {**common, "tid": threads[str(bar["stage"])], "name": str(bar["stage"]), "cat": "stage", "args": args}
            )
    return events


def _counter(pid: int, name: str, t: float, values: dict[str, float | None], us: Any) -> dict[str, Any] | None:
    kept = {k: v for k, v in values.items() if v is not None}
    if not kept:
        return None
    return {"ph": "C", "name": name, "pid": pid, "tid": 0, "ts": us(t), "args": kept}


def _telemetry_events(run: RunView, us: Any) -> list[dict[str, Any]]:
    table = run.telemetry
    if table is None or table.empty or "time_unix_s" not in table:
        return []
    events: list[dict[str, Any]] = []
    nodes = sorted(str(n) for n in table["node"].dropna().unique()) if "node" in table else ["local"]
    for index, node in enumerate(nodes):
        pid = NODE_PID + index
        rows = table[table["node"].astype(str) == node] if "node" in table else table
        hosts = ", ".join(sorted(str(h) for h in rows["host"].dropna().unique())) if "host" in rows else ""
        events += _meta(pid, f"node {node}" + (f" ({hosts})" if hosts else ""), 10 + index)
        host_rows = rows[rows["source"] == "host"] if "source" in rows else rows
        for _, row in host_rows.iterrows():
            t = _finite(row["time_unix_s"])
            if t is None:
                continue
            for name, series in HOST_COUNTERS:
                event = _counter(pid, name, t, {k: _finite(row.get(c)) for k, c in series.items()}, us)
                if event:
                    events.append(event)
        gpu_rows = rows[rows["source"] == "gpu"] if "source" in rows else rows.iloc[0:0]
        for _, row in gpu_rows.iterrows():
            t = _finite(row["time_unix_s"])
            if t is None:
                continue
            device = int(row["device"]) if _finite(row.get("device")) is not None else 0
            for name, column in GPU_COUNTERS:
                event = _counter(pid, f"GPU {device} {name}", t, {"value": _finite(row.get(column))}, us)
                if event:
                    events.append(event)
    return events


def _comm_events(run: RunView, us: Any) -> list[dict[str, Any]]:
    table = run.comm
    if table is None or table.empty or "time_unix_s" not in table:
        return []
    events = _meta(NCCL_PID, "NCCL collectives", 5)
    threads: dict[tuple[str, int], int] = {}
    for _, row in table.iterrows():
        t = _finite(row["time_unix_s"])
        if t is None:
            continue
        key = (str(row.get("host", "")), int(row["pid"]) if _finite(row.get("pid")) is not None else 0)
        if key not in threads:
            threads[key] = len(threads) + 1
            events.append(
                {
                    "ph": "M",
                    "name": "thread_name",
                    "pid": NCCL_PID,
                    "tid": threads[key],
                    "args": {"name": f"{key[0]} pid {key[1]}"},
                }
            )
        args = {k: row[k] for k in ("op", "rank", "nranks", "bytes", "total_bytes", "datatype") if k in row}
        args = {k: (v if isinstance(v, str) else _finite(v)) for k, v in args.items()}
        events.append(
            {
                "ph": "i",
                "s": "t",
                "name": str(row.get("op", "collective")),
                "cat": "nccl",
                "pid": NCCL_PID,
                "tid": threads[key],
                "ts": us(t),
                "args": {k: v for k, v in args.items() if v is not None},
            }
        )
    return events


def build_trace(run: RunView) -> dict[str, Any]:
    """The trace of one run (the module docstring); a record with no times at all gives an empty trace."""
    origin = _origin(run)

    def us(t: float) -> float:
        return round((t - origin) * 1e6, 1)

    events: list[dict[str, Any]] = []
    if origin is not None:
        events = _step_events(run, us) + _telemetry_events(run, us) + _comm_events(run, us)
    kept = [event for event in events if _writable(event)]  # a damaged time or value costs its event only
    return {
        "traceEvents": kept,
        "displayTimeUnit": "ms",
        "otherData": {
            "run": str(run.path.name),
            "framework": run.record["framework"]["name"],
            "workload": run.record["workload"]["name"],
            "origin_unix_s": origin,
            "stages": PLACED,
            "dropped_events": len(events) - len(kept),  # times or values out of range (a damaged record)
        },
    }


def trace_summary(trace: dict[str, Any]) -> str:
    """One line: what the trace holds."""
    events = trace["traceEvents"]
    spans = sum(e["ph"] == "X" for e in events)
    counters = sum(e["ph"] == "C" for e in events)
    collectives = sum(e["ph"] == "i" for e in events)
    tracks = sum(e["ph"] == "M" and e["name"] == "process_name" for e in events)
    dropped = trace["otherData"].get("dropped_events") or 0
    left_out = f"; {dropped} events with times out of range left out" if dropped else ""
    return f"{tracks} tracks, {spans} spans, {counters} counter samples, {collectives} collectives{left_out}"
