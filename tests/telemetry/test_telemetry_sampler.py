"""The telemetry sampler for real: a separate process sampling a busy child, on CPU (and a GPU when present)."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from rlbench.harness.telemetry.align import per_step_telemetry
from rlbench.harness.telemetry.columns import NAMES
from rlbench.harness.telemetry.sampler import start_sampler
from rlbench.harness.telemetry.store import journal_file, read_journal

# 220 MB touched page by page (so it is resident), then pure-Python CPU until killed
BURN = """
import time
block = bytearray(220_000_000)
for i in range(0, len(block), 4096):
    block[i] = 1
end = time.time() + 120
while time.time() < end:
    sum(range(1000))
"""

# stands in for nvidia-ml-py on a machine with a GPU, so the no-NVML path is tested everywhere
FAKE_PYNVML = """
class NVMLError(Exception):
    pass

def nvmlInit():
    raise NVMLError("Driver Not Loaded")
"""


def _sleeper(seconds: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds})"])


def _wait_for_rows(out: Path, rows: int, deadline_s: float = 60.0) -> None:
    """Wait until the sampler has journaled `rows` rows: its ticks pace themselves by their own cost and run in
    SCHED_IDLE, so on a busy 2-core host the rate asked for is an upper bound, not a count to sleep for."""
    deadline = time.monotonic() + deadline_s
    while len(read_journal(out)) < rows:
        assert time.monotonic() < deadline, f"fewer than {rows} rows journaled in {deadline_s:.0f} s"
        time.sleep(0.1)


def _fake_nvml_env(tmp_path: Path) -> dict[str, str]:
    fake = tmp_path / "fake_nvml"
    fake.mkdir()
    (fake / "pynvml.py").write_text(FAKE_PYNVML)
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(fake), os.environ.get("PYTHONPATH")]))}


def test_sampler_measures_cpu_and_memory_of_a_busy_child(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", BURN])
    try:
        handle = start_sampler(tmp_path / "telemetry.parquet", child.pid, rate_hz=20, flush_every_s=0.1)
        _wait_for_rows(tmp_path / "telemetry.parquet", 12)
    finally:
        child.kill()
        child.wait()
    path = handle.stop()

    assert path == tmp_path / "telemetry.parquet" and path.exists()
    table = pd.read_parquet(path)
    assert tuple(table.columns) == NAMES
    host = table[table["source"] == "host"]
    assert len(host) >= 10
    assert (host["device"] == -1).all()
    assert host["proc_rss_gb"].max() >= 0.2
    assert host["proc_cpu_util_pct"].median() > 30
    assert host["time_unix_s"].is_monotonic_increasing
    # nothing half-written or left over next to the result
    assert sorted(p.name for p in tmp_path.iterdir()) == ["telemetry.notes.json", "telemetry.parquet"]
    notes = handle.notes()
    assert notes["ticks"] >= 10 and notes["sampler_cpu_s"] > 0

    # the recorded table feeds the alignment directly
    times = host["time_unix_s"]
    steps = pd.DataFrame({"step": [1], "step_start_unix_s": [times.iloc[1]], "step_end_unix_s": [times.iloc[-2]]})
    per_step = per_step_telemetry(table, steps)
    assert per_step["samples"].iloc[0] >= 8
    assert per_step["proc_rss_peak_gb"].iloc[0] >= 0.2


def test_without_nvml_the_sampler_says_so_once_and_samples_the_host(tmp_path, capfd):
    child = _sleeper(30)
    try:
        out = tmp_path / "telemetry.parquet"
        handle = start_sampler(out, child.pid, rate_hz=20, flush_every_s=0.1, env=_fake_nvml_env(tmp_path))
        _wait_for_rows(out, 3)
        path = handle.stop()
    finally:
        child.kill()
        child.wait()
    table = pd.read_parquet(path)
    assert (table["source"] == "host").sum() >= 3
    assert (table["source"] == "gpu").sum() == 0
    notes = handle.notes()
    assert notes["nvml"] is False
    # Said once where a GPU is there to miss (its /dev/nvidiaN nodes); on a CPU machine nothing is said at all.
    from rlbench.harness.telemetry.accelerators import nvidia_driver_present

    said = ["NVML unavailable (Driver Not Loaded); sampling the host only"] if nvidia_driver_present() else []
    assert [note for note in notes["notes"] if "NVML unavailable" in note] == said
    assert capfd.readouterr().err.count("NVML unavailable") == len(said)


def test_sampler_stops_by_itself_when_the_root_exits(tmp_path):
    child = _sleeper(60)
    handle = start_sampler(tmp_path / "telemetry.parquet", child.pid, rate_hz=20, flush_every_s=0.1)
    _wait_for_rows(tmp_path / "telemetry.parquet", 3)
    child.kill()
    child.wait()
    handle.process.wait(timeout=10)  # no stop() yet: the sampler noticed on its own
    path = handle.stop()
    assert handle.notes()["stop_reason"] == "root process exited"
    host = pd.read_parquet(path).query("source == 'host'")
    assert len(host) >= 3
    assert host["proc_rss_gb"].iloc[-1] != host["proc_rss_gb"].iloc[-1]  # NaN once the tree is gone


def test_journaled_rows_survive_a_killed_sampler(tmp_path):
    child = _sleeper(30)
    out = tmp_path / "telemetry.parquet"
    try:
        handle = start_sampler(out, child.pid, rate_hz=20, flush_every_s=0.1)
        _wait_for_rows(out, 5)
        os.kill(handle.process.pid, signal.SIGKILL)  # a crash: no chance to write the final file
        handle.process.wait()
        assert not out.exists()
        flushed = len(read_journal(out))
        path = handle.stop()  # rebuilds the file from the journal
    finally:
        child.kill()
        child.wait()
    assert path == out
    assert flushed >= 5 and len(pd.read_parquet(path)) == flushed
    assert not journal_file(out).exists()


def test_start_sampler_rejects_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="rate_hz"):
        start_sampler(tmp_path / "t.parquet", os.getpid(), rate_hz=0)
    child = _sleeper(0)
    child.wait()
    with pytest.raises(ValueError, match="not a running process"):
        start_sampler(tmp_path / "t.parquet", child.pid)


@pytest.mark.gpu
def test_sampler_reads_a_real_gpu_under_matmul_load(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    handle = start_sampler(tmp_path / "telemetry.parquet", os.getpid(), rate_hz=20)
    start = time.time()
    while time.time() - start < 3.0:
        for _ in range(20):
            a = (a @ a).clamp_(-1, 1)
        torch.cuda.synchronize()
    end = time.time()
    path = handle.stop()
    table = pd.read_parquet(path)
    gpu = table[table["source"] == "gpu"]
    busiest = gpu.groupby("device")["gpu_util_pct"].mean().idxmax()  # NVML and CUDA numbering may differ
    gpu = gpu[gpu["device"] == busiest]
    assert len(gpu) >= 20
    assert gpu["gpu_util_pct"].max() > 50
    assert gpu["mem_used_gb"].max() > 0.1
    assert gpu["power_w"].max() > 50
    assert gpu["sm_clock_mhz"].max() > 0
    steps = pd.DataFrame({"step": [1], "step_start_unix_s": [start + 0.5], "step_end_unix_s": [end - 0.2]})
    per_step = per_step_telemetry(table, steps)
    assert per_step["energy_j"].iloc[0] > 50  # > 50 W for > 2 s on the loaded GPU
    assert per_step["gpu_util_mean_pct"].iloc[0] > 30
    print(handle.notes()["notes"], per_step.to_dict("records"))


class _Busy:
    """A process the tree finds already running: `age_s` old, busy on one core all along (psutil's interface)."""

    def __init__(self, pid: int, now: float, age_s: float) -> None:
        self.pid, self._born, self._now = pid, now - age_s, now

    def create_time(self) -> float:
        return self._born

    def oneshot(self):
        import contextlib

        return contextlib.nullcontext()

    def cpu_times(self):
        import types

        return types.SimpleNamespace(user=self._now - self._born, system=0.0)

    def memory_info(self):
        import types

        return types.SimpleNamespace(rss=10**8)


def test_a_process_found_late_is_not_a_spike_and_no_reading_exceeds_the_cores(monkeypatch):
    """Processes born between two rebuilds of the member list used CPU before they were found: crediting all of it
    to the tick they are found in read 1,300 % of one core on a 2-core host. Each is now credited its tick's
    share at its rate so far, and no reading is above 100 % x the logical cores."""
    import psutil

    from rlbench.harness.telemetry import host_probe

    tree = host_probe.ProcessTree(os.getpid(), exclude_pids=frozenset({os.getpid()}))
    monkeypatch.setattr(host_probe, "_PROC_STAT", False)  # the fakes answer through psutil's interface
    now = time.time()
    tree._last_time = now - 0.1  # a 0.1 s tick
    one = [_Busy(10**6, now, age_s=0.7)]  # one core for 0.7 s: its share of the tick is one core
    monkeypatch.setattr(tree, "_members", lambda: one)
    monkeypatch.setattr(host_probe.time, "time", lambda: now)
    assert tree.sample()["proc_cpu_util_pct"] == pytest.approx(100.0, rel=0.01)  # was 700
    tree._cpu_seen, tree._last_time = {}, now - 0.1
    many = [_Busy(10**6 + i, now, age_s=0.7) for i in range(20)]  # twenty found at once (Ray's workers start)
    monkeypatch.setattr(tree, "_members", lambda: many)
    assert tree.sample()["proc_cpu_util_pct"] == 100.0 * psutil.cpu_count()  # at most every core, never 2,000 %


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads Linux's /proc")
def test_the_walks_own_proc_reading_agrees_with_psutil():
    """The walk reads /proc/<pid>/stat itself (a quarter of psutil's cost): the same three figures as psutil's."""
    import psutil

    from rlbench.harness.telemetry import host_probe

    code = "block = bytearray(50_000_000); sum(range(10**7)); print('ready', flush=True); input()"
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert child.stdout.readline() == b"ready\n"  # idle from here: its figures hold still
        process = psutil.Process(child.pid)
        created, cpu, rss = host_probe._reading(process, psutil.boot_time())
        times = process.cpu_times()
        assert created == pytest.approx(process.create_time(), abs=0.02)
        assert cpu == pytest.approx(times.user + times.system, abs=0.05)
        assert rss == pytest.approx(process.memory_info().rss, rel=0.05)
    finally:
        child.kill()
        child.wait()
    with pytest.raises(psutil.NoSuchProcess):
        host_probe._reading(process, psutil.boot_time())


def test_costly_readings_pace_themselves_within_their_cpu_budget(monkeypatch):
    """A verl lane's tree made the 1 Hz PSS read and the 4 Hz walk cost 17% of a core on 2 cores: each costly
    reading now waits its cost / budget before it runs again, and ticks stretch (to at most 2 s) where they cost."""
    from rlbench.harness.telemetry import host_probe, sample_loop

    assert host_probe._paced(0.0001, 1.0, 30.0) == 1.0  # cheap: the ordinary rate
    assert host_probe._paced(0.02, 1.0, 30.0) == pytest.approx(0.02 / host_probe.CPU_BUDGET)  # 20 s
    assert host_probe._paced(5.0, 1.0, 30.0) == 30.0  # never slower than the cap
    assert sample_loop.paced_period(0.25, 0.0005, cores=2) == 0.25
    assert sample_loop.paced_period(0.25, 0.004, cores=2) == pytest.approx(0.004 / (2 * sample_loop.TICK_CPU_BUDGET))
    assert sample_loop.paced_period(0.1, 0.002, cores=16) == 0.1  # a GPU node's cores: 10 Hz kept
    assert sample_loop.paced_period(0.25, 1.0, cores=2) == sample_loop.MAX_PERIOD_S

    tree = host_probe.ProcessTree(os.getpid(), exclude_pids=frozenset())
    clock = iter([0.0, 0.02] * 1000)  # every timed PSS read "costs" 20 ms of CPU
    monkeypatch.setattr(host_probe.time, "process_time", lambda: next(clock))
    tree._pss_at = float("-inf")
    assert not math.isnan(tree._pss(time.time()))
    assert tree.pss_every_s == pytest.approx(0.02 / host_probe.CPU_BUDGET) and tree.last_costly_cpu_s >= 0.02
    assert math.isnan(tree._pss(time.time() + 5))  # 20 s until the next read


def test_pss_is_reread_only_for_members_whose_rss_moved(monkeypatch):
    """PSS reads were most of a verl lane's sampler CPU: a member whose RSS holds keeps its last PSS reading, one
    whose RSS moved past PSS_REREAD_RSS_SHIFT is read again, and the sum covers both."""
    import types

    from rlbench.harness.telemetry import host_probe

    class Member:
        def __init__(self, pid: int, pss: float) -> None:
            self.pid, self.pss, self.reads = pid, pss, 0

        def memory_full_info(self):
            self.reads += 1
            return types.SimpleNamespace(pss=self.pss)

    tree = host_probe.ProcessTree(os.getpid(), exclude_pids=frozenset())
    idle, busy = Member(1, 1e8), Member(2, 3e8)
    tree._members_cache = [idle, busy]
    rss = {1: 2e8, 2: 4e8}

    def read(now: float) -> float:
        tree._rss_now = {pid: ((pid, 0.0), value) for pid, value in rss.items()}
        tree._pss_at = float("-inf")
        return tree._pss(now)

    assert read(0.0) == 4e8 and (idle.reads, busy.reads) == (1, 1)
    rss[2] *= 1.0 + 2 * host_probe.PSS_REREAD_RSS_SHIFT  # the busy worker grew; the idle daemon did not
    busy.pss = 5e8
    rss[1] *= 1.0 + host_probe.PSS_REREAD_RSS_SHIFT / 2
    assert read(1.0) == 6e8 and (idle.reads, busy.reads) == (1, 2)
    tree._members_cache = [busy]  # the daemon exited: its reading leaves the sum
    assert read(2.0) == 5e8
