"""A stand-in framework for the fault tests: a real process tree that logs TRL-format metrics and misbehaves.

Run by `FakeAdapter` (below) instead of TRL's trainer, so signal, disk-full and crash
cases take seconds. It starts one child (a second process in its group, to check
that rlbench stops the whole tree), writes its and the child's PIDs to
`fake_pids.txt`, logs FAULT_STEPS steps FAULT_STEP_S apart (reward FAULT_REWARD, default 0.25), then does FAULT_MODE:

    ok          exit 0
    hang        sleep until stopped (the signal tests)
    stubborn    hang, ignoring SIGTERM in both processes (rlbench must escalate to SIGKILL)
    crash       a Python traceback, then more log lines, exit 1
    cuda_oom    a CUDA out-of-memory traceback, exit 1
    sigkill     SIGKILL itself halfway through a metrics line (a kill without OOM evidence)
    fill_disk   fill the run folder's filesystem up to FAULT_LEAVE_BYTES free, exit 0

    FAULT_MODE=crash python tests/fault/framework.py run/framework_metrics.jsonl
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from rlbench.adapters.base import LaunchPlan
from rlbench.adapters.trl.adapter import TRLAdapter


class FakeAdapter(TRLAdapter):
    """TRL's checks, metrics format and record, with this file as the launched trainer."""

    name = "fake"

    def plan(self, spec, inputs, run_dir: Path) -> LaunchPlan:
        env = {k: v for k, v in os.environ.items() if k.startswith("FAULT_")}
        return LaunchPlan(
            argv=[sys.executable, str(Path(__file__).resolve()), str(self.metrics_file(run_dir))], env=env
        )


def _line(step: int, start: float, end: float) -> str:
    return json.dumps(
        {
            "step": step,
            "step_time_s": end - start,
            "step_start_unix_s": start,
            "step_end_unix_s": end,
            "stages_s": {"gen": (end - start) / 2, "make_experience": (end - start) / 2},
            "tokens": {"prompt": 1600, "prompt_padded": 2000, "response": 512, "responses": 16},
            "memory": {"peak_host_rss_gb": 0.1, "peak_device_memory_gb": None},
            "trl": {"reward": float(os.environ.get("FAULT_REWARD", "0.25")), "completions/mean_length": 32.0},
        }
    )


def _fill(folder: Path, leave: int) -> None:
    with (folder / "filler.bin").open("wb", buffering=0) as handle:
        try:
            while True:
                handle.write(b"\0" * 4096)
        except OSError:
            pass
    filler = folder / "filler.bin"
    os.truncate(filler, max(0, filler.stat().st_size - leave))


def main(metrics_file: Path) -> int:
    mode = os.environ.get("FAULT_MODE", "ok")
    stubborn = mode == "stubborn"
    preexec = (lambda: signal.signal(signal.SIGTERM, signal.SIG_IGN)) if stubborn else None
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], preexec_fn=preexec)
    (metrics_file.parent / "fake_pids.txt").write_text(f"{os.getpid()} {child.pid}\n")
    if stubborn:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("fake framework: starting", flush=True)
    for step in range(1, int(os.environ.get("FAULT_STEPS", "3")) + 1):
        start = time.time()
        time.sleep(float(os.environ.get("FAULT_STEP_S", "0.2")))
        with metrics_file.open("a") as handle:
            handle.write(_line(step, start, time.time()) + "\n")
        print(f"{{'loss': 0.0, 'step': {step}}}", flush=True)  # what trainers print after each step
    if mode in ("hang", "stubborn"):
        while True:
            time.sleep(1)
    if mode == "crash":
        print(
            'Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n    step()\n'
            "ValueError: shapes (4, 8) and (16, 8) not aligned",
            flush=True,
        )
        print("[rank0] shutting down workers", flush=True)
        print("{'loss': 0.1, 'epoch': 1.0}", flush=True)
    elif mode == "cuda_oom":
        print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", flush=True)
    elif mode == "sigkill":  # killed while writing a metrics line: half a line stays in the file
        with metrics_file.open("a") as handle:
            handle.write('{"step": 2, "step_ti')
        os.kill(os.getpid(), signal.SIGKILL)
    elif mode == "fill_disk":
        _fill(metrics_file.parent, int(os.environ.get("FAULT_LEAVE_BYTES", "0")))
    child.kill()
    return 1 if mode in ("crash", "cuda_oom") else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
