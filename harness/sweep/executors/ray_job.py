"""The entrypoint of one sweep run inside a Ray job: `rlbench run`, then the record printed to the log.

    python -m rlbench.harness.sweep.executors.ray_job --framework trl --workload gsm8k-grpo-tiny --steps 2

Arguments are those of `rlbench run` without `--out`: the record goes to a scratch
folder on the node ($RLBENCH_RAY_SCRATCH, default the system temp folder), is
printed as a record block (`rlbench.harness.sweep.executors.record_transfer`) and the scratch is
removed. The run is `python -m rlbench.harness run` in a child process, as a user's
shell would start it (the sweep layer never imports the CLI). `ray job stop` sends
SIGTERM: it is passed on to that run, which stops the framework and writes the
partial record as for any SIGTERM, and the record still comes back (within
RAY_JOB_STOP_WAIT_TIME_S, which the sweep raises for its jobs).
An empty OMP_NUM_THREADS (the sweep's way of saying "unset", since Ray forces 1 on
jobs without one) is removed so the framework threads as under `rlbench run`.
The exit code is that of `rlbench run`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from rlbench.harness.record.store import RUN_FILE
from rlbench.harness.settings import ray_scratch
from rlbench.harness.sweep.executors.record_transfer import pack


def main(argv: list[str]) -> int:
    if os.environ.get("OMP_NUM_THREADS") == "":  # the sweep's "unset" (see ray_executor._submit)
        del os.environ["OMP_NUM_THREADS"]
    scratch = Path(tempfile.mkdtemp(prefix="rlbench-job-", dir=ray_scratch()))
    try:
        run = subprocess.Popen([sys.executable, "-m", "rlbench.harness", "run", *argv, "--out", str(scratch)])

        def pass_on(signum, frame) -> None:
            signal.signal(signum, signal.SIG_IGN)  # one stop is enough; the run then writes its record
            with contextlib.suppress(ProcessLookupError):
                run.send_signal(signum)

        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, pass_on)
        returncode = run.wait()
        code = 128 - returncode if returncode < 0 else returncode  # killed by a signal: as a shell reports it
        # The run is over and its record written: a stop arriving now must not cut the record on its way out.
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, signal.SIG_IGN)
        for run_dir in sorted(p for p in scratch.iterdir() if (p / RUN_FILE).is_file()):
            print(pack(run_dir), flush=True)
        return code
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
