"""The sampler process: samples host, process tree and GPUs until told to stop, at its rate or slower where a
tick would cost more CPU than TICK_CPU_BUDGET (a large process tree gets fewer samples, not the framework's CPU).

Started by `rlbench.harness.telemetry.sampler.start_sampler` as its own process so that
sampling never competes with the framework's Python threads. It stops on SIGTERM
or SIGINT (taking one last sample), when the root process exits, or when its
parent (the runner) exits, and then writes `<out>` and `<out stem>.notes.json`.
The notes file is also written at start; the runner waits for it as the sign that
sampling has begun.

    python -m rlbench.harness.telemetry.sample_loop --pid 1234 --out runs/x/telemetry.parquet --rate-hz 10
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from rlbench.harness.telemetry.columns import LOCAL_NODE
from rlbench.harness.telemetry.host_probe import ProcessTree
from rlbench.harness.telemetry.nvml import GpuProbe, open_gpus
from rlbench.harness.telemetry.store import append_rows, combine_parts, notes_file, write_notes


def _tick(tree: ProcessTree, gpus: GpuProbe | None, host: str, node: str = LOCAL_NODE) -> list[dict[str, Any]]:
    rows = [{"time_unix_s": time.time(), "host": host, "node": node, "source": "host", "device": -1, **tree.sample()}]
    for row in gpus.sample() if gpus else ():
        rows.append({"host": host, "node": node, "source": "gpu", **row})
    return rows


# Share of the machine (all its cores) the sampler's ticks may take on average (the tree's rebuild and PSS read
# have their own, host_probe.CPU_BUDGET): a tick that costs more than that stretches the period, never past
# MAX_PERIOD_S, so a large process tree costs fewer samples rather than the framework's CPU. On 2 cores that is
# 0.3% of one core (with the two paced readings, 0.5%: a verl lane's sampler took 1.24% of its run's CPU at
# budgets twice these); a 16-core GPU node keeps 10 Hz for ticks under 2.4 ms.
TICK_CPU_BUDGET, MAX_PERIOD_S = 0.0015, 2.0


def paced_period(base_period: float, tick_cpu_s: float, cores: int | None = None) -> float:
    """The period between ticks: the asked-for one, or longer where a tick's CPU would exceed TICK_CPU_BUDGET."""
    budget = TICK_CPU_BUDGET * (cores or psutil.cpu_count() or 1)
    return max(base_period, min(MAX_PERIOD_S, tick_cpu_s / budget))


def _next_tick(next_tick: float, period: float) -> tuple[float, int]:
    """The next tick on the original grid, and how many ticks were missed to get there."""
    missed = 0
    next_tick += period
    now = time.monotonic()
    while next_tick <= now:  # a slow tick: skip the missed ticks rather than firing them in a burst
        next_tick += period
        missed += 1
    return next_tick, missed


def _stop_orphaned_group(root_pid: int) -> None:
    """The runner died (SIGKILL, OOM killer) with the framework still running: nobody would ever stop it
    or read what it logs, and it holds the GPUs. Stop its process group, which it leads (runner.launch
    starts it in a session of its own): SIGTERM, then SIGKILL after a grace period."""
    try:
        if os.getpgid(root_pid) != root_pid:
            return  # not a group leader (a PID reused meanwhile): never signal someone else's group
        os.killpg(root_pid, signal.SIGTERM)
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline and psutil.pid_exists(root_pid):
            time.sleep(0.2)
        os.killpg(root_pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _yield_to_the_framework() -> str | None:
    """Lowest CPU priority: on a host whose cores the framework keeps busy, a late tick costs nothing while a
    sampler tick taken from the framework slows what is measured. Its timestamps stay exact, so a late tick is
    still placed right. Linux's SCHED_IDLE class never preempts the framework's threads on wakeup (nice 19 alone
    still does: on a 2-core OpenRLHF lane its steps were 4-12% slower with rlbench beside them while rlbench used
    under 1% of the CPU, more than its CPU time explains, as when a torch thread is descheduled inside a
    parallel region and its siblings wait); elsewhere nice 19.
    Returns what was reached, or None where the OS refuses both."""
    reached = None
    try:
        reached = f"nice {os.nice(19 - os.nice(0))}"
    except OSError:
        pass
    if hasattr(os, "sched_setscheduler") and hasattr(os, "SCHED_IDLE"):
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
            reached = "SCHED_IDLE" + (f", {reached}" if reached else "")
        except OSError:
            pass
    return reached


def run(
    root_pid: int,
    out_file: Path,
    rate_hz: float,
    devices: list[int] | None = None,
    flush_every_s: float = 60.0,
    parent_pid: int | None = None,
    stop_orphan: bool = False,
    node: str = LOCAL_NODE,
) -> dict[str, Any]:
    """Sample until stopped; returns the notes that were also written next to `out_file`."""
    requested: list[str] = []

    def on_signal(signum: int, frame: object) -> None:
        requested.append(signal.Signals(signum).name)  # only a flag: the loop finishes its tick

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    priority = _yield_to_the_framework()
    parent_pid = os.getppid() if parent_pid is None else parent_pid
    host = socket.gethostname()
    try:
        tree: ProcessTree | None = ProcessTree(root_pid, exclude_pids=frozenset({os.getpid()}))
    except psutil.Error:
        tree = None
    gpus, notes = open_gpus(devices)
    for note in notes:
        print(f"rlbench telemetry: {note}", file=sys.stderr, flush=True)  # said once, at start
    meta: dict[str, Any] = {
        "host": host,
        "node": node,
        "root_pid": root_pid,
        "sampler_pid": os.getpid(),
        "rate_hz": rate_hz,
        "priority": priority,
        "nvml": gpus is not None,
        "gpus": gpus.names() if gpus else {},
        "started_unix_s": time.time(),
        "notes": notes,
    }
    try:
        write_notes(notes_file(out_file), meta)
    except OSError as error:
        print(
            f"rlbench telemetry: cannot write in {out_file.parent}: {error.strerror or error}",
            file=sys.stderr,
            flush=True,
        )
        raise SystemExit(1) from None
    rows: list[dict[str, Any]] = []
    ticks = overruns = 0
    period = base_period = 1.0 / rate_hz
    tick_cpu = 0.0  # a running mean of one tick's CPU, the tree's costly readings left out (they pace themselves)
    longest_period = period
    cores = psutil.cpu_count() or 1
    next_tick, last_flush = time.monotonic() + period, time.monotonic()
    reason = "unknown" if tree else f"root process {root_pid} not found"
    loop_cpu = time.process_time()
    try:
        while tree is not None:
            time.sleep(max(0.0, next_tick - time.monotonic()))
            started_cpu = time.process_time()
            rows.extend(_tick(tree, gpus, host, node))  # also the last sample after a stop request
            ticks += 1
            cost = time.process_time() - started_cpu - tree.last_costly_cpu_s
            tick_cpu = cost if ticks == 1 else 0.8 * tick_cpu + 0.2 * cost
            period = paced_period(base_period, tick_cpu, cores)
            longest_period = max(longest_period, period)
            if requested:
                reason = f"stopped by {requested[0]}"
                break
            if not tree.root_alive():
                reason = "root process exited"
                break
            if os.getppid() != parent_pid:
                reason = "parent process exited"
                if stop_orphan:
                    _stop_orphaned_group(root_pid)
                    reason += "; stopped the framework's process group it left running"
                break
            if time.monotonic() - last_flush >= flush_every_s:
                try:
                    append_rows(rows, out_file)
                    rows = []
                except OSError:
                    pass  # no room for the journal: keep the rows in memory and try again next flush
                last_flush = time.monotonic()
            next_tick, missed = _next_tick(next_tick, period)
            overruns += missed
    except Exception as error:  # keep what was sampled; the error goes into the notes
        reason = f"sampler error: {type(error).__name__}: {error}"
        print(f"rlbench telemetry: {reason}", file=sys.stderr, flush=True)
    finally:
        loop_cpu = time.process_time() - loop_cpu  # what sampling itself cost, without start-up and the write
        if gpus:
            notes = notes + [note for note in gpus.notes if note not in notes]
            gpus.close()
        try:
            combine_parts(out_file, rows)
        except OSError as error:  # a full disk or read-only folder: one line, and the runner goes on without it
            notes = notes + [f"telemetry not written: {error.strerror or error}"]
            print(
                f"rlbench telemetry: could not write {out_file.name}: {error.strerror or error}",
                file=sys.stderr,
                flush=True,
            )
        own = os.times()
        meta.update(
            {
                "stopped_unix_s": time.time(),
                "stop_reason": reason,
                "ticks": ticks,
                "missed_ticks": overruns,
                "notes": notes,
                "sampler_cpu_s": own.user + own.system,
                "loop_cpu_s": loop_cpu,
                "longest_period_s": longest_period,  # above 1/rate_hz where ticks were paced by their cost
                "pss_every_s": tree.pss_every_s if tree is not None else None,
                # where loop_cpu_s went: the tree's two paced readings, the rest is ticks and the loop itself
                "rebuild_cpu_s": tree.rebuild_cpu_s if tree is not None else None,
                "pss_cpu_s": tree.pss_cpu_s if tree is not None else None,
            }
        )
        try:
            write_notes(notes_file(out_file), meta)
        except OSError:
            pass  # said above when it was the parquet; the notes file alone is not worth a second line
    return meta


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rlbench.harness.telemetry.sample_loop", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--pid", type=int, required=True, help="root of the process tree to measure")
    parser.add_argument("--out", type=Path, required=True, help="telemetry parquet to write at stop")
    parser.add_argument("--rate-hz", type=float, default=10.0)
    parser.add_argument("--devices", default=None, help="NVML GPU indices, comma separated (default: all; empty: none)")
    parser.add_argument("--node", default=LOCAL_NODE, help="the `node` column of the rows (telemetry/columns.py)")
    parser.add_argument("--flush-every-s", type=float, default=60.0, help="append to the crash journal this often")
    parser.add_argument("--parent-pid", type=int, default=None, help="stop when this process exits (default: parent)")
    parser.add_argument(
        "--stop-orphan", action="store_true", help="if the parent dies first, stop the process group that --pid leads"
    )
    args = parser.parse_args(argv)
    devices = [int(d) for d in args.devices.split(",") if d.strip()] if args.devices is not None else None
    run(args.pid, args.out, args.rate_hz, devices, args.flush_every_s, args.parent_pid, args.stop_orphan, args.node)
    return 0


if __name__ == "__main__":
    sys.exit(main())
