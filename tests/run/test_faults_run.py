"""Fault injection for `rlbench run`: real processes, real signals, a real full or read-only disk.

Each case runs the real CLI on a stand-in framework (tests/fault/framework.py: a
process tree that logs TRL-format metrics, then hangs, crashes or kills itself)
and checks what a user gets: the exit code, exactly one `error:` line, no
traceback, a valid record in a terminal status with the steps logged so far, and
no framework process left behind.

    python -m pytest -q tests/run/test_faults_run.py
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from rlbench.harness.record.read import read_record
from rlbench.harness.record.status import TERMINAL_STATUSES
from rlbench.harness.record.store import effective_status
from tests.conftest import PROJECT_ROOT, run_cli

TINY = "gsm8k-grpo-tiny"


def start_run(
    out: Path,
    mode: str,
    *,
    steps: int = 2,
    step_s: float = 0.2,
    env: dict[str, str] | None = None,
    total_steps: int = 4,
    workload: str | None = None,
) -> subprocess.Popen:
    """`rlbench run` on the stand-in framework, with SIGINT at its default (as a shell's Ctrl-C, even under nohup)."""
    full_env = {**os.environ, "FAULT_MODE": mode, "FAULT_STEPS": str(steps), "FAULT_STEP_S": str(step_s), **(env or {})}
    return subprocess.Popen(
        run_argv(out, total_steps, workload or TINY),
        cwd=PROJECT_ROOT,
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def run_argv(out: Path, total_steps: int = 4, workload: str = TINY) -> list[str]:
    return [
        sys.executable,
        "-m",
        "tests.fault.cli",
        "run",
        "--framework",
        "fake",
        "--workload",
        workload,
        "--steps",
        str(total_steps),
        "--out",
        str(out),
    ]


def run_dir_of(out: Path) -> Path:
    found = [p for p in out.iterdir() if p.is_dir()] if out.is_dir() else []
    assert len(found) == 1, found
    return found[0]


def wait_for_steps(out: Path, n: int, timeout_s: float = 120) -> Path:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        metrics = list(out.glob("*/framework_metrics.jsonl"))
        if metrics and sum(1 for line in metrics[0].read_text().splitlines() if '"step"' in line) >= n:
            return metrics[0].parent
        time.sleep(0.1)
    raise AssertionError(f"the framework did not log {n} steps in {timeout_s} s")


def framework_pids(run_dir: Path) -> list[int]:
    return [int(pid) for pid in (run_dir / "fake_pids.txt").read_text().split()]


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE  # a zombie holds nothing; PID 1 may not reap
    except psutil.NoSuchProcess:
        return False


def finish(process: subprocess.Popen, timeout_s: float = 60) -> tuple[int, str]:
    _, stderr = process.communicate(timeout=timeout_s)
    return process.returncode, stderr


def check_user_view(returncode: int, stderr: str, expected_rc: int) -> str:
    """The exit code, exactly one `error:` line, no traceback; returns the error line."""
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert returncode == expected_rc, stderr
    assert len(errors) == 1, stderr
    assert "Traceback" not in stderr, stderr
    return errors[0]


def check_record(run_dir: Path, status: str) -> dict:
    """A valid record in the given terminal status, no temporary files, no framework process left."""
    record = read_record(run_dir)
    assert record["status"] == status and status in TERMINAL_STATUSES
    assert record["ended_at"] and record["error"]["kind"]
    assert not [p.name for p in run_dir.iterdir() if ".tmp" in p.name], list(run_dir.iterdir())
    assert not [pid for pid in framework_pids(run_dir) if alive(pid)]
    return record


@pytest.fixture(scope="module", autouse=True)
def warm_cache(model_cache, tmp_path_factory):
    """One clean run first: it builds the tiny model and measures this CPU's peaks (for prediction.json),
    about a minute in a fresh cache; every case below then takes seconds."""
    pytest.importorskip("trl")
    code, stderr = finish(start_run(tmp_path_factory.mktemp("warm"), "ok", steps=1, total_steps=1), timeout_s=600)
    assert code == 0, stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_stop_signal_stops_the_tree_and_keeps_the_logged_steps(tmp_path, sig):
    run = start_run(tmp_path, "hang", steps=2)
    run_dir = wait_for_steps(tmp_path, 2)
    run.send_signal(sig)
    line = check_user_view(*finish(run), expected_rc=128 + sig)
    assert signal.Signals(sig).name in line
    record = check_record(run_dir, "interrupted")
    assert record["error"]["signal"] == signal.Signals(sig).name
    assert record["steps_recorded"] == 2 and len(record["steps"]) == 2


def test_two_quick_ctrl_c_still_record_and_hurry_a_stubborn_framework(tmp_path):
    run = start_run(tmp_path, "stubborn", steps=1)  # framework and its child ignore SIGTERM
    run_dir = wait_for_steps(tmp_path, 1)
    run.send_signal(signal.SIGINT)
    time.sleep(0.3)
    started = time.monotonic()
    run.send_signal(signal.SIGINT)
    check_user_view(*finish(run), expected_rc=130)
    assert time.monotonic() - started < 8  # the second Ctrl-C skipped the 10 s graceful wait
    record = check_record(run_dir, "interrupted")
    assert record["steps_recorded"] == 1


def test_ctrl_c_twice_from_a_terminal_reaches_the_whole_group(tmp_path):
    """A terminal sends SIGINT to its whole foreground group (rlbench and what it started in its group)."""
    run = subprocess.Popen(
        run_argv(tmp_path),
        cwd=PROJECT_ROOT,
        env={**os.environ, "FAULT_MODE": "hang", "FAULT_STEPS": "1", "FAULT_STEP_S": "0.2"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    run_dir = wait_for_steps(tmp_path, 1)
    os.killpg(run.pid, signal.SIGINT)
    time.sleep(0.05)
    os.killpg(run.pid, signal.SIGINT)
    check_user_view(*finish(run), expected_rc=130)
    assert check_record(run_dir, "interrupted")["steps_recorded"] == 1


def _paused_run(tmp_path: Path, where: str) -> subprocess.Popen:
    marker = tmp_path / "paused"
    run = start_run(tmp_path / "results", "ok", env={"FAULT_PAUSE_AT": where, "FAULT_PAUSE_MARKER": str(marker)})
    end = time.monotonic() + 60
    while not marker.exists():
        assert time.monotonic() < end and run.poll() is None, "the run never reached its pause"
        time.sleep(0.1)
    return run


def test_a_signal_before_any_record_leaves_nothing(tmp_path):
    run = _paused_run(tmp_path, "inputs")
    run.send_signal(signal.SIGTERM)
    line = check_user_view(*finish(run), expected_rc=143)
    assert "nothing was recorded" in line
    assert not list((tmp_path / "results").glob("*"))


def test_a_signal_after_the_record_started_but_before_launch_ends_it(tmp_path):
    run = _paused_run(tmp_path, "launch")
    run.send_signal(signal.SIGHUP)
    check_user_view(*finish(run), expected_rc=129)
    record = read_record(run_dir_of(tmp_path / "results"))
    assert record["status"] == "interrupted" and record["error"]["signal"] == "SIGHUP"
    assert record["steps_recorded"] == 0


def test_a_crash_is_a_framework_error_with_the_line_that_says_so(tmp_path):
    code, stderr = finish(start_run(tmp_path, "crash", steps=1), timeout_s=120)
    check_user_view(code, stderr, expected_rc=2)
    record = check_record(run_dir_of(tmp_path), "failed")
    assert record["error"]["kind"] == "framework_error"
    assert record["error"]["message"] == "ValueError: shapes (4, 8) and (16, 8) not aligned"  # not the last line
    assert any(line.startswith("Traceback") for line in record["error"]["log_tail"])
    assert record["steps_recorded"] == 1


def test_a_sigkill_without_oom_evidence_is_not_called_oom(tmp_path):
    code, stderr = finish(start_run(tmp_path, "sigkill", steps=1), timeout_s=120)
    check_user_view(code, stderr, expected_rc=2)
    record = check_record(run_dir_of(tmp_path), "failed")
    assert record["error"]["kind"] == "signal" and "signal 9 (SIGKILL)" in record["error"]["message"]
    assert record["returncode"] == -9 and record["steps_recorded"] == 1


def test_cuda_oom_text_is_oom(tmp_path):
    code, stderr = finish(start_run(tmp_path, "cuda_oom", steps=1), timeout_s=120)
    check_user_view(code, stderr, expected_rc=2)
    record = check_record(run_dir_of(tmp_path), "failed")
    assert record["error"]["kind"] == "oom" and "CUDA out of memory" in record["error"]["message"]


def test_timeout_stops_the_tree(tmp_path):
    code, stderr = finish(start_run(tmp_path, "hang", steps=1, env={"RLBENCH_RUN_TIMEOUT_S": "4"}), timeout_s=120)
    check_user_view(code, stderr, expected_rc=2)
    record = check_record(run_dir_of(tmp_path), "failed")
    assert record["error"]["kind"] == "timeout" and record["steps_recorded"] == 1


def test_sigkill_of_rlbench_leaves_a_record_readers_call_abandoned(tmp_path):
    run = start_run(tmp_path, "hang", steps=1)
    run_dir = wait_for_steps(tmp_path, 1)
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == "running" and effective_status(record, run_dir) == "running"
    assert record["runner"]["pid"] == run.pid
    run.kill()
    run.communicate(timeout=30)
    try:
        assert effective_status(json.loads((run_dir / "run.json").read_text()), run_dir) == "abandoned"
        report = run_cli("report", str(tmp_path), "--out", str(tmp_path / "report.html"))
        assert report.returncode == 0 and "Traceback" not in report.stderr, report.stderr
        assert "abandoned" in (tmp_path / "report.html").read_text()
        end = time.monotonic() + 20  # the sampler saw its parent die and stopped the framework's group
        while time.monotonic() < end and any(alive(pid) for pid in framework_pids(run_dir)):
            time.sleep(0.2)
        assert not [pid for pid in framework_pids(run_dir) if alive(pid)]
    finally:
        for pid in framework_pids(run_dir):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def small_tmpfs(tmp_path):
    """A real 256 KB tmpfs (needs root and mount rights; skipped where the machine refuses)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        # Lazily (-l): a process a failed test left in the folder must not keep the mount; twice when a
        # test put a read-only bind mount over it.
        while subprocess.run(["umount", "-l", str(mount)], capture_output=True).returncode == 0:
            pass


def test_disk_full_while_recording(small_tmpfs):
    """The framework fills the disk and exits 0: the record's files cannot be written, run.json still ends."""
    code, stderr = finish(start_run(small_tmpfs, "fill_disk", steps=4, env={"FAULT_LEAVE_BYTES": "0"}), timeout_s=120)
    line = check_user_view(code, stderr, expected_rc=2)
    assert "No space left on device" in line
    record = check_record(run_dir_of(small_tmpfs), "failed")
    assert record["error"]["kind"] == "record_error"


def test_read_only_disk_while_recording(small_tmpfs):
    """The results folder turns read-only mid-run (a read-only bind mount over it: new opens get EROFS)."""
    out = small_tmpfs / "results"
    run = start_run(out, "ok", steps=3, step_s=1.0, total_steps=3)
    run_dir = wait_for_steps(out, 1)
    for command in (
        ["mount", "--bind", str(small_tmpfs), str(small_tmpfs)],
        ["mount", "-o", "remount,bind,ro", str(small_tmpfs)],
    ):
        subprocess.run(command, check=True, capture_output=True)
    line = check_user_view(*finish(run), expected_rc=2)
    assert "Read-only file system" in line
    record = json.loads((run_dir / "run.json").read_text())  # could not be rewritten: still "running" on disk
    assert effective_status(record, run_dir) == "abandoned"  # ... which readers show as abandoned
    assert not [p.name for p in run_dir.iterdir() if ".tmp" in p.name]
    assert not [pid for pid in framework_pids(run_dir) if alive(pid)]


def test_effective_status_from_pid_heartbeat_or_timeout(tmp_path):
    import socket

    from rlbench.harness.record.run_record import write_run_json

    now = time.time()
    here = {
        "status": "running",
        "runner": {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "pid_started_unix_s": psutil.Process().create_time(),
            "heartbeat_s": 30,
        },
    }
    assert effective_status(here) == "running"
    reused = {**here, "runner": {**here["runner"], "pid_started_unix_s": 1.0}}  # same PID, another process
    assert effective_status(reused) == "abandoned"
    elsewhere = {"status": "running", "runner": {"host": "another-host", "pid": 1, "heartbeat_s": 30}}
    write_run_json(tmp_path, elsewhere)
    assert effective_status(elsewhere, tmp_path) == "running"
    os.utime(tmp_path / "run.json", (now - 3600, now - 3600))
    assert effective_status(elsewhere, tmp_path) == "abandoned"
    old = {"status": "running", "started_at": "2020-01-01T00:00:00+00:00", "timeout_s": 7200}
    assert effective_status(old) == "abandoned" and effective_status({**old, "status": "failed"}) == "failed"
    # Another host, no heartbeat, a start time nobody can read: the file's age is the evidence left.
    nothing = {"status": "running", "runner": {"host": "another-host"}, "started_at": "garbled"}
    lost = tmp_path / "lost"
    lost.mkdir()
    write_run_json(lost, nothing)
    assert effective_status(nothing, lost) == "running"  # just written: it may well be alive
    os.utime(lost / "run.json", (now - 3600, now - 3600))
    assert effective_status(nothing, lost) == "abandoned"


def test_sigkill_is_oom_only_with_evidence(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rlbench.harness.run.failure_cause import classify, memory_limit_gb, oom_kill_count

    (tmp_path / "framework.log").write_text("step 1\n{'loss': 0.1}\n")
    assert classify(-9, tmp_path, oom_kill_count(), None)["kind"] == "signal"
    before = oom_kill_count()
    if before is not None:  # the kernel counted one more OOM kill during the run
        assert classify(-9, tmp_path, before - 1, None)["kind"] == "oom"
    telemetry = tmp_path / "telemetry.parquet"
    at_limit = 0.97 * memory_limit_gb()
    pq.write_table(pa.table({"proc_rss_gb": [1.0, at_limit], "host_mem_used_gb": [2.0, at_limit]}), telemetry)
    error = classify(-9, tmp_path, oom_kill_count(), telemetry)
    assert error["kind"] == "oom" and "memory at" in error["message"]
    assert classify(-15, tmp_path, oom_kill_count(), telemetry)["kind"] == "signal"  # SIGTERM is never OOM


def test_an_out_folder_that_cannot_hold_a_record_is_refused_before_launch(tmp_path, small_tmpfs):
    """--out under a regular file, on a read-only filesystem, on a full disk: one error line, nothing left."""
    (tmp_path / "a-file").write_text("")
    subprocess.run(["mount", "-o", "remount,size=8k", str(small_tmpfs)], check=True)  # too small for run.json + prompts
    read_only = tmp_path / "read-only"
    read_only.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,ro", "tmpfs", str(read_only)], check=True)
    try:
        for out, why in (
            (tmp_path / "a-file" / "results", "Not a directory"),
            (read_only / "results", "Read-only file system"),
            (small_tmpfs, "No space left on device"),
        ):
            line = check_user_view(*finish(start_run(out, "ok")), expected_rc=2)
            assert why in line
        assert not list(small_tmpfs.iterdir())  # the half-made run folder was removed
    finally:
        subprocess.run(["umount", "-l", str(read_only)], capture_output=True)
