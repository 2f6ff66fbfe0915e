"""`rlbench` with the stand-in framework registered as `fake`; everything else is the real CLI.

FAULT_PAUSE_AT=inputs|launch holds the run there (after writing FAULT_PAUSE_MARKER) so a
test can signal it at a known point: before any record, or with run.json written but
nothing launched.

    python -m tests.fault.cli run --framework fake --workload gsm8k-grpo-tiny --steps 3 --out /tmp/r
"""

from __future__ import annotations

import faulthandler
import os
import signal
import time
from pathlib import Path

import rlbench.harness.run.resolve
import rlbench.harness.run.watch
from rlbench.adapters.registry import ADAPTERS
from rlbench.harness.cli import main

ADAPTERS["fake"] = "tests.fault.framework:FakeAdapter"
faulthandler.register(signal.SIGUSR1)  # `kill -USR1` shows where a hung test run is


def _pause_before(phase, name: str) -> None:
    real = getattr(phase, name)

    def paused(*args, **kwargs):
        Path(os.environ["FAULT_PAUSE_MARKER"]).touch()
        time.sleep(60)  # the test's signal lands here
        return real(*args, **kwargs)

    setattr(phase, name, paused)


if os.environ.get("FAULT_PAUSE_AT"):
    # the phase module that calls each: resolve makes the inputs, watch launches the framework
    _pause_before(
        *{
            "inputs": (rlbench.harness.run.resolve, "prepare_inputs"),
            "launch": (rlbench.harness.run.watch, "launch"),
        }[os.environ["FAULT_PAUSE_AT"]]
    )

if __name__ == "__main__":
    main()
