"""The pre-launch step that GPU adapters run in the launched process, before the framework itself.

`python -m rlbench.adapters.<adapter> PROMPTS DATA -- COMMAND...` checks the machine
(a clear message instead of a framework traceback), converts the run's prompts into
the framework's data file, then `exec`s COMMAND in the same process, so the runner's
timeout and Ctrl-C handling still reach the framework.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path


def run_prelaunch(
    argv: list[str],
    *,
    module: str,
    data_name: str,
    framework: str,
    machine_ready: Callable[[], tuple[bool, str]],
    convert: Callable[[Path, Path], int],
    note: str = "",
    before_exec: Callable[[Path, list[str]], None] | None = None,
) -> int:
    """Check, convert, exec; returns 2 (with one line on stderr) when it cannot start.

    before_exec(DATA, COMMAND), when given, runs last before the exec (e.g. OpenRLHF's adapter records
    the arguments OpenRLHF's own parser resolves from COMMAND); it must not raise."""
    if "--" not in argv or argv.index("--") != 2 or len(argv) < 4:
        print(f"usage: python -m {module} PROMPTS {data_name} -- COMMAND...", file=sys.stderr)
        return 2
    ready, why = machine_ready()
    if not ready:
        print(f"{framework} cannot run on this machine: {why}", file=sys.stderr)  # the runner's error message
        return 2
    count = convert(Path(argv[0]), Path(argv[1]))
    print(f"rlbench: wrote {count} prompts to {argv[1]}; starting {framework}{note}", flush=True)
    command = argv[3:]
    if before_exec is not None:
        before_exec(Path(argv[1]), command)
    os.execv(command[0], command)  # same pid and process group: the runner's timeout and Ctrl-C still apply
    return 0  # not reached
