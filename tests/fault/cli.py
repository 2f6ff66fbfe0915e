"""`rlbench` with the stand-in framework registered as `fake`; everything else is the real CLI.

    python -m tests.fault.cli run --framework fake --workload gsm8k-grpo-tiny --steps 3 --out /tmp/r
"""

from __future__ import annotations

import faulthandler
import signal

from rlbench.adapters.registry import ADAPTERS
from rlbench.cli import main

ADAPTERS["fake"] = "tests.fault.framework:FakeAdapter"
faulthandler.register(signal.SIGUSR1)  # `kill -USR1` shows where a hung test run is

if __name__ == "__main__":
    main()
