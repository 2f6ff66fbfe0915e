"""What the runner does on each poll while the framework runs: print new steps, beat the heartbeat, and
decide whether the workload's quality target has been reached (which ends the run)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from rlbench.adapters.roles import ReadsMetrics
from rlbench.harness.record.store import HEARTBEAT_S, heartbeat
from rlbench.harness.record.time_to_target import time_to_target
from rlbench.harness.run.derive import derive_step_metrics
from rlbench.harness.run.step_stamps import note_seen
from rlbench.harness.spec.runspec import RunSpec


class ProgressPrinter:
    """Prints `step i/N` lines as the framework's metrics file grows."""

    def __init__(
        self, adapter: ReadsMetrics, run_dir: Path, total_steps: int, gpu_count: int, echo: Callable[[str], None]
    ):
        self.adapter, self.run_dir, self.total, self.gpus, self.echo = adapter, run_dir, total_steps, gpu_count, echo
        self.shown = 0
        self.size = -1
        self.steps = pd.DataFrame()  # the steps seen so far (the framework's own timer)

    def __call__(self) -> None:
        path = self.adapter.metrics_file(self.run_dir)
        size = path.stat().st_size if path.exists() else 0
        if size == self.size:
            return
        self.size = size
        steps, _ = derive_step_metrics(self.adapter.read_steps(self.run_dir), self.gpus)  # live: own timer
        self.steps = steps
        note_seen(self.run_dir, steps["step"].iloc[self.shown :].tolist() if not steps.empty else [])
        for row in steps.iloc[self.shown :].itertuples():
            self.echo(
                f"step {int(row.step)}/{self.total}  {row.step_time_s:7.2f} s  "
                f"{row.tokens_per_s:9.1f} tokens/s  reward {row.reward_mean:.3f}"
            )
        self.shown = len(steps)


def quiet(echo: Callable[[str], None]) -> Callable[[str], None]:
    """Progress lines that never fail the run: after SIGHUP the terminal is gone and writes raise EIO."""

    def say(line: str) -> None:
        try:
            echo(line)
        except OSError:
            pass

    return say


def with_heartbeat(
    progress: Callable[[], None], run_dir: Path, also: Callable[[], None] | None = None
) -> Callable[[], None]:
    """`progress`, then `also`, on every poll; run.json touched every HEARTBEAT_S (readers tell a live run)."""
    last = [time.monotonic()]

    def poll() -> None:
        if time.monotonic() - last[0] >= HEARTBEAT_S:
            heartbeat(run_dir)
            last[0] = time.monotonic()
        progress()
        if also is not None:
            also()

    return poll


def target_watch(spec: RunSpec, printer: ProgressPrinter, echo: Callable[[str], None]) -> Callable[[], bool]:
    """Whether the workload's quality target, where it ends the run, holds on the steps seen so far."""
    target = spec.workload.target
    if target is None or not target.stop:
        return lambda: False
    seen = [(-1, -1)]

    def reached() -> bool:
        steps = printer.steps
        # a framework may log an evaluation after its step's row: a new value of the metric counts as news
        logged = (len(steps), int(steps[target.metric].notna().sum()) if target.metric in steps else 0)
        if steps.empty or logged == seen[0]:
            return False
        seen[0] = logged
        found = time_to_target(steps, dataclasses.asdict(target), None, 0)
        if found["reached"]:
            over = "evaluations" if target.evaluates else "steps"
            echo(
                f"target reached at step {found['step']} ({target.metric} over {target.window} {over} >= "
                f"{target.value:g}): stopping the run"
            )
        return bool(found["reached"])

    return reached
