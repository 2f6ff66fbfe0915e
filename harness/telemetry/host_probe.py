"""Host readings for the sampler: system CPU and memory, and the framework's process tree.

The tree is root_pid and all its descendants. Finding the descendants means
reading /proc/<pid>/stat of every process on the host (psutil's ppid map), which
costs milliseconds on a busy node, so the member list is rebuilt at most every
`rediscover_s` (default 1 s) and only the members are read on the ticks between.
Each member's CPU seconds are kept between ticks (keyed by pid and create time,
so a reused pid is a new process) and CPU use is their delta, rather than
psutil's per-object cpu_percent: a process born since the previous rebuild has
all its CPU time counted on the tick it is found (no CPU-second is lost, though
that tick would read high: 1,300 % of one core on a 2-core host). So a newly
found process is credited only the share of its CPU time that falls in the tick,
taking its use as even since it started (what it used before the tick went
uncounted in earlier readings); and a reading
never exceeds what the host's logical cores can do in a tick (100 % x cores), which
the kernel's 10 ms tick resolution could otherwise give. CPU of a process that
starts and exits between two rebuilds is not seen. At 20 Hz one reading of a busy
process jitters by about +-20 %.

The two costly readings pace themselves: the member list's rebuild and the PSS
read (smaps_rollup, a walk of each process's mappings: 5 ms for a process with
torch loaded, 0.2 s for a verl lane's whole tree) each run again only after
their last cost divided by CPU_BUDGET has passed, so each takes at most that
share of one core whatever the tree (a 2-core verl lane spent 17% of a core on
them at a fixed 1 Hz). A member whose RSS has not moved keeps its last PSS
reading (a verl lane's PSS reads were 0.88 s of its sampler's 1.39 s).

    python -c "from rlbench.harness.telemetry.host_probe import ProcessTree; import os; \\
        t = ProcessTree(os.getpid()); print(t.sample(), t.root_alive())"
"""

from __future__ import annotations

import os
import time
from typing import Any

import psutil

# Share of one core each costly reading (the member rebuild, the PSS read) may take on average: its next run waits
# cost / CPU_BUDGET, never less than rediscover_s and never more than the MAX below.
CPU_BUDGET = 0.001
MAX_REDISCOVER_S, MAX_PSS_EVERY_S = 10.0, 30.0
# A member's PSS is read again only once its RSS has moved by more than this fraction since its last read.
PSS_REREAD_RSS_SHIFT = 0.02


def _paced(cost_s: float, least_s: float, most_s: float) -> float:
    """Seconds until a reading that cost `cost_s` of CPU may run again."""
    return min(most_s, max(least_s, cost_s / CPU_BUDGET))


_PROC_STAT = os.path.exists("/proc/self/stat")
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if _PROC_STAT else 100
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if _PROC_STAT else 4096


def _reading(process: psutil.Process, boot_unix_s: float) -> tuple[float, float, float]:
    """(create time in unix s, CPU seconds, RSS bytes) of one member. On Linux one read of /proc/<pid>/stat, a
    quarter of psutil's cost for the same three figures (its objects read stat and statm): the walk is the
    sampler's cost paid every tick. CPU is user + system of this process only: its children are members in
    their own right. Raises psutil.NoSuchProcess once it has exited."""
    if not _PROC_STAT:
        with process.oneshot():
            times = process.cpu_times()
            return process.create_time(), times.user + times.system, float(process.memory_info().rss)
    try:
        with open(f"/proc/{process.pid}/stat", "rb") as stat:
            data = stat.read()
    except OSError:
        raise psutil.NoSuchProcess(process.pid) from None
    # fields after "(comm)", which may hold spaces: state is field 3, so field n is at index n - 3
    fields = data[data.rindex(b")") + 2 :].split()
    user, system, started, rss_pages = int(fields[11]), int(fields[12]), int(fields[19]), int(fields[21])
    return boot_unix_s + started / _CLOCK_TICKS, (user + system) / _CLOCK_TICKS, float(rss_pages * _PAGE_BYTES)


class ProcessTree:
    """CPU, RSS and PSS of a process tree, sampled tick by tick."""

    def __init__(self, root_pid: int, exclude_pids: frozenset[int] = frozenset(), rediscover_s: float = 1.0) -> None:
        self.root_pid = root_pid
        self.exclude_pids = exclude_pids  # the sampler itself when the root is its parent
        self.rediscover_s = rediscover_s
        self._root = psutil.Process(root_pid)
        self._cpu_seen: dict[tuple[int, float], float] = {}  # (pid, create time) -> CPU s at last tick
        self._members_cache: list[psutil.Process] = []
        self._found_at = float("-inf")  # the last rebuild of the member list
        self._last_time = time.time()
        self._pss_at = float("-inf")
        self.rediscover_every_s = rediscover_s  # paced by the rebuild's own cost (_paced)
        self.pss_every_s = rediscover_s  # paced by the PSS read's own cost
        self.last_costly_cpu_s = 0.0  # CPU the last sample spent on a rebuild or PSS read (the tick's pace excludes it)
        self.rebuild_cpu_s = self.pss_cpu_s = 0.0  # their totals, for the notes
        self._ceiling_pct = 100.0 * (psutil.cpu_count() or 1)  # every logical core busy for the whole tick
        self._boot_unix_s = psutil.boot_time()
        self._rss_now: dict[int, tuple[tuple[int, float], float]] = {}  # pid -> (key, RSS bytes) at the last walk
        self._pss_seen: dict[tuple[int, float], tuple[float, float]] = {}  # key -> (RSS, PSS bytes) at its last read
        psutil.cpu_percent(None)  # prime: the first system reading is relative to this call
        self._walk(prime=True)

    def root_alive(self) -> bool:
        """False once the root has exited; a zombie (exited, not yet reaped) counts as exited."""
        try:
            return self._root.is_running() and self._root.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    def _members(self) -> list[psutil.Process]:
        now = time.time()
        if now - self._found_at < self.rediscover_every_s:
            return self._members_cache
        cpu = time.process_time()
        try:
            members = [self._root, *self._root.children(recursive=True)]
        except psutil.Error:
            members = []
        self._members_cache = [p for p in members if p.pid not in self.exclude_pids]
        self._found_at = now
        cost = time.process_time() - cpu
        self.last_costly_cpu_s += cost
        self.rebuild_cpu_s += cost
        self.rediscover_every_s = _paced(cost, self.rediscover_s, MAX_REDISCOVER_S)
        return self._members_cache

    def _walk(self, prime: bool = False, tick_s: float = 0.0) -> tuple[float, float, int]:
        """(CPU seconds used in the last `tick_s`, RSS bytes, processes) over the current tree."""
        now = time.time()
        seen: dict[tuple[int, float], float] = {}
        rss_now: dict[int, tuple[tuple[int, float], float]] = {}
        cpu_delta = rss = 0.0
        for process in self._members():
            try:
                created, cpu, resident = _reading(process, self._boot_unix_s)
            except psutil.Error:
                continue  # exited while we looked
            key = (process.pid, created)
            rss += resident
            rss_now[process.pid] = (key, resident)
            if key in self._cpu_seen:
                cpu_delta += max(0.0, cpu - self._cpu_seen[key])  # < 0 only if the pid was reused since
            elif not prime:
                # New to the tree (born since the previous rebuild, mostly): none of its CPU time was counted yet.
                # It is credited this tick's share at its average rate since it started, never its whole past:
                # create_time rests on /proc/stat's whole-second boot time, so no finer test of "born when" holds.
                age = now - key[1]
                cpu_delta += cpu * (min(1.0, tick_s / age) if age > tick_s > 0 else 1.0)
            seen[key] = cpu
        self._cpu_seen, self._rss_now = seen, rss_now
        return cpu_delta, rss, len(seen)

    def _pss(self, now: float) -> float:
        """Summed PSS of the tree in bytes, read once per `pss_every_s` (NaN between): each shared page counts
        once in all (divided among its sharers), so unlike summed RSS it never exceeds the host's memory in use.
        It reads /proc/<pid>/smaps_rollup, a walk of the process's mappings (5 ms for a process with torch
        loaded), hence the paced rate, and re-reads a member only where its RSS moved more than
        PSS_REREAD_RSS_SHIFT since its last read (idle daemons and a step's steady workers keep their reading;
        a sharer's exit can then leave a reading low by its share until the member's RSS moves)."""
        if now - self._pss_at < self.pss_every_s:
            return float("nan")
        self._pss_at = now
        cpu = time.process_time()
        total = 0.0
        seen: dict[tuple[int, float], tuple[float, float]] = {}
        for process in self._members_cache:
            key, resident = self._rss_now.get(process.pid, ((process.pid, -1.0), float("nan")))
            last = self._pss_seen.get(key)
            if last is not None and abs(resident - last[0]) <= PSS_REREAD_RSS_SHIFT * last[0]:
                seen[key] = last
                total += last[1]
                continue
            try:
                pss = float(process.memory_full_info().pss)
            except (psutil.Error, AttributeError):  # exited, or not ours to read, or no PSS on this OS
                continue
            seen[key] = (resident, pss)
            total += pss
        self._pss_seen = seen
        cost = time.process_time() - cpu
        self.last_costly_cpu_s += cost
        self.pss_cpu_s += cost
        self.pss_every_s = _paced(cost, self.rediscover_s, MAX_PSS_EVERY_S)
        return total

    def sample(self) -> dict[str, Any]:
        """One host row (without time/host/source/device): system and process-tree readings."""
        now = time.time()
        self.last_costly_cpu_s = 0.0
        alive = self.root_alive()
        elapsed = max(now - self._last_time, 1e-6)
        cpu_delta, rss, count = self._walk(tick_s=elapsed) if alive else (float("nan"), float("nan"), 0)
        self._last_time = now
        memory = psutil.virtual_memory()
        return {
            "cpu_util_pct": psutil.cpu_percent(None),
            "proc_cpu_util_pct": min(100.0 * cpu_delta / elapsed, self._ceiling_pct),
            "proc_rss_gb": rss / 1e9,
            "proc_pss_gb": self._pss(now) / 1e9 if alive else float("nan"),
            "proc_count": count,
            "host_mem_used_gb": (memory.total - memory.available) / 1e9,
        }
