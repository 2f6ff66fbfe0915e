"""NCCL collectives from NCCL's own debug log: parse, size, summarise (pure; no file I/O).

With `NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL` every NCCL call logs one line,
`INFO(NCCL_COLL, "%s: opCount %lx sendbuff %p recvbuff %p count %zu datatype %d op
%d root %d comm %p [nranks=%d] stream %p", ...)` in `ncclEnqueueCheck`
(src/enqueue.cc; unchanged from NCCL 2.7 to 2.30 but for `%zi` -> `%zu`), behind
the prefix `host:pid:tid [cudaDev] NCCL INFO ` from `ncclDebugLog` (src/debug.cc).
The bracketed number is the CUDA device, not the rank: the rank comes from the
INIT line `<func> comm %p rank %d nranks %d cudaDev %d ... - Init START/COMPLETE`
(src/init.cc), hence INIT in the subsystems. Lines carry no time unless
`NCCL_DEBUG_TIMESTAMP_LEVELS` includes INFO (NCCL >= 2.26); the timestamp then
precedes the host. `nccl_env()` asks for `[%s.%6f] ` (unix seconds); NCCL's
default format `[%F %T] ` is local time and is converted only given the UTC offset.

Sizes: `bytes` = count x element size, the buffer NCCL's `count` refers to. That is
the whole buffer for AllReduce, Broadcast and Reduce, the message for Send/Recv,
but ONE RANK'S SHARE for AllGather (send count), ReduceScatter (receive count),
AlltoAll (per peer), Gather and Scatter. `total_bytes` is nccl-tests' "size" (the
full buffer: bytes x nranks for those five). `bus_bytes` = total_bytes x nccl-tests'
bus factor (2(n-1)/n AllReduce; (n-1)/n AllGather, ReduceScatter, AlltoAll,
Gather, Scatter; 1 Broadcast, Reduce, Send, Recv), so bus_bytes / time is busbw
(nccl-tests doc/PERFORMANCE.md, src/*.cu GetBw).

    python -c "from rlbench.harness.telemetry.nccl import parse_nccl_log, summarize_collectives; \\
        print(summarize_collectives(parse_nccl_log(open('tests/data/nccl_coll_sample.log'))))"
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pandas as pd

from rlbench.harness.telemetry.windows import assign_steps, check_steps

# ncclDataType_t (src/nccl.h.in): id -> (name, bytes per element)
DATATYPES: dict[int, tuple[str, int]] = {
    0: ("int8", 1),
    1: ("uint8", 1),
    2: ("int32", 4),
    3: ("uint32", 4),
    4: ("int64", 8),
    5: ("uint64", 8),
    6: ("float16", 2),
    7: ("float32", 4),
    8: ("float64", 8),
    9: ("bfloat16", 2),
    10: ("float8e4m3", 1),
    11: ("float8e5m2", 1),
}
REDOPS = {0: "sum", 1: "prod", 2: "max", 3: "min", 4: "avg"}  # ncclRedOp_t; higher ids are PreMulSum ops
REDUCING = frozenset({"AllReduce", "ReduceScatter", "Reduce"})
PER_RANK_COUNT = frozenset({"AllGather", "ReduceScatter", "AlltoAll", "Gather", "Scatter"})

COLLECTIVE_COLUMNS = (
    "time_unix_s",
    "host",
    "pid",
    "tid",
    "cuda_dev",
    "nccl_version",
    "comm",
    "comm_id",
    "scope",
    "rank",
    "nranks",
    "op",
    "opcount",
    "count",
    "datatype",
    "dtype_bytes",
    "bytes",
    "total_bytes",
    "bus_bytes",
    "redop",
    "root",
    "stream",
)

_PREFIX = re.compile(
    r"(?:\[(?P<ts>[^\]]+)\]\s*)?(?P<host>[^\s:\[\]]+):(?P<pid>\d+):(?P<tid>\d+) "
    r"\[(?P<dev>\d+)\] NCCL INFO (?P<msg>.*)"
)
_COLL = re.compile(
    r"(?P<op>[A-Za-z]+): opCount (?P<opcount>[0-9a-fA-F]+) sendbuff (?P<sendbuff>\S+) "
    r"recvbuff (?P<recvbuff>\S+) count (?P<count>\d+) datatype (?P<datatype>\d+) op (?P<redop>\d+) "
    r"root (?P<root>-?\d+) comm (?P<comm>\S+) \[nranks=(?P<nranks>\d+)\] stream (?P<stream>\S+)"
)
_INIT = re.compile(r"comm (?P<comm>\S+) rank (?P<rank>\d+) nranks (?P<nranks>\d+) cudaDev \d+")
_COMM_ID = re.compile(r" commId (?P<id>0x[0-9a-fA-F]+)")  # the communicator's id, the same in every rank's line
# Where a communicator's ranks run: on one host, over several, or unknown (no commId logged, e.g. a split).
SCOPES = ("intra-node", "inter-node", "unknown")
_VERSION = re.compile(r"NCCL version (?P<version>\S+)")
_DATETIME = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?")


def nccl_env(enabled: bool, log_path: Path | str | None = None) -> dict[str, str]:
    """Environment for the framework so NCCL logs its collectives; {} when not enabled.

    log_path: e.g. run_dir / "nccl"; NCCL then writes one file per process,
    `nccl.<host>.<pid>` (`%h`, `%p` are expanded by NCCL). Without it NCCL logs to stdout.
    COLL logs a line per NCCL call: enable it for profiling runs, not for timing runs.
    """
    if not enabled:
        return {}
    env = {
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": "INIT,COLL",
        "NCCL_DEBUG_TIMESTAMP_LEVELS": "WARN,INFO",
        "NCCL_DEBUG_TIMESTAMP_FORMAT": "[%s.%6f] ",
    }
    if log_path is not None:
        env["NCCL_DEBUG_FILE"] = f"{log_path}.%h.%p"
    return env


def _timestamp(text: str | None, utc_offset_s: float | None) -> float:
    if not text:
        return float("nan")
    text = text.strip()
    try:
        return float(text)  # "[%s.%6f]": unix seconds
    except ValueError:
        pass
    if utc_offset_s is None or not _DATETIME.fullmatch(text):
        return float("nan")  # local wall-clock time without a known zone: not placed on the unix axis
    zone = timezone(timedelta(seconds=utc_offset_s))
    return datetime.fromisoformat(text.replace(" ", "T")).replace(tzinfo=zone).timestamp()


def _sizes(op: str, count: int, dtype_bytes: float, nranks: int) -> tuple[float, float, float]:
    size = count * dtype_bytes
    total = size * nranks if op in PER_RANK_COUNT else size
    factor = {"AllReduce": 2 * (nranks - 1) / nranks, "Broadcast": 1.0, "Reduce": 1.0, "Send": 1.0, "Recv": 1.0}.get(
        op, (nranks - 1) / nranks if op in PER_RANK_COUNT else float("nan")
    )
    return size, total, total * factor


def parse_nccl_log(lines: Iterable[str], utc_offset_s: float | None = None) -> pd.DataFrame:
    """One row per NCCL call found in `lines` (columns COLLECTIVE_COLUMNS); other lines are skipped.

    Lines of several processes may be interleaved (ranks are tracked per host, pid
    and communicator). Anything before the timestamp or host (a launcher's
    `[rank0]:` tag) is ignored. `rank` is missing when the INIT lines were not logged.
    """
    ranks: dict[tuple[str, int, str], int] = {}
    comm_ids: dict[tuple[str, int, str], str] = {}
    versions: dict[tuple[str, int], str] = {}
    rows = []
    for line in lines:
        if "NCCL INFO" not in line:
            continue
        prefix = _PREFIX.search(line)
        if prefix is None:
            continue
        host, pid, message = prefix["host"], int(prefix["pid"]), prefix["msg"].rstrip()
        if (coll := _COLL.match(message)) is None:
            if init := _INIT.search(message):
                ranks[(host, pid, init["comm"])] = int(init["rank"])
                if comm_id := _COMM_ID.search(message):
                    comm_ids[(host, pid, init["comm"])] = comm_id["id"]
            elif version := _VERSION.match(message):
                versions[(host, pid)] = version["version"]
            continue
        op, count, nranks, dtype = coll["op"], int(coll["count"]), int(coll["nranks"]), int(coll["datatype"])
        name, dtype_bytes = DATATYPES.get(dtype, (f"unknown({dtype})", float("nan")))
        size, total, bus = _sizes(op, count, dtype_bytes, nranks)
        redop = int(coll["redop"])
        rows.append(
            {
                "time_unix_s": _timestamp(prefix["ts"], utc_offset_s),
                "host": host,
                "pid": pid,
                "tid": int(prefix["tid"]),
                "cuda_dev": int(prefix["dev"]),
                "nccl_version": versions.get((host, pid)),
                "comm": coll["comm"],
                "comm_id": comm_ids.get((host, pid, coll["comm"])),
                "scope": "unknown",
                "rank": ranks.get((host, pid, coll["comm"])),
                "nranks": nranks,
                "op": op,
                "opcount": int(coll["opcount"], 16),
                "count": count,
                "datatype": name,
                "dtype_bytes": dtype_bytes,
                "bytes": size,
                "total_bytes": total,
                "bus_bytes": bus,
                "redop": REDOPS.get(redop, f"premulsum({redop})") if op in REDUCING else "",
                "root": int(coll["root"]),
                "stream": coll["stream"],
            }
        )
    table = pd.DataFrame(rows, columns=list(COLLECTIVE_COLUMNS))
    table["scope"] = _scopes(table)
    return table.astype({"rank": "Int64", "pid": "int64", "count": "int64", "opcount": "int64"})


def _scopes(table: pd.DataFrame) -> pd.Series:
    """Each call's SCOPES entry: inter-node where its communicator's ranks logged from more than one host (the
    ranks' lines, collected from every node, share the commId), intra-node where all from one."""
    if table.empty:
        return pd.Series([], dtype=object)
    hosts = table.dropna(subset=["comm_id"]).groupby("comm_id")["host"].nunique()
    spans = table["comm_id"].map(hosts)
    return spans.map(lambda n: "unknown" if pd.isna(n) else ("inter-node" if n > 1 else "intra-node"))


def summarize_collectives(
    table: pd.DataFrame, step_boundaries: pd.DataFrame | None = None, by: Sequence[str] = ("op",)
) -> pd.DataFrame:
    """Calls and bytes per `by` group (per step first, when step windows are given).

    Every rank logs its own call, so one AllReduce over 8 ranks is 8 calls;
    `calls_per_process` divides by the logging processes. step_boundaries (`step`,
    `step_start_unix_s`, `step_end_unix_s`) needs timestamped lines; calls outside
    every step are kept with step <NA>.
    """
    keys = list(by)
    table = table.assign(_process=table["host"].astype(str) + ":" + table["pid"].astype(str))
    if step_boundaries is not None:
        if len(table) and table["time_unix_s"].isna().all():
            raise ValueError(
                "the NCCL lines have no timestamps, so they cannot be put into steps: set "
                "NCCL_DEBUG_TIMESTAMP_LEVELS=INFO (NCCL >= 2.26) as nccl_env() does"
            )
        ordered = check_steps(step_boundaries)
        where = assign_steps(table["time_unix_s"].to_numpy(float), ordered)
        step_ids = ordered["step"].to_numpy()
        table = table.assign(step=pd.array([step_ids[i] if i >= 0 else pd.NA for i in where], dtype="Int64"))
        keys = ["step", *keys]
    summary = (
        table.groupby(keys, dropna=False, sort=True)
        .agg(
            calls=("op", "size"),
            processes=("_process", "nunique"),
            bytes=("bytes", "sum"),
            total_bytes=("total_bytes", "sum"),
            bus_bytes=("bus_bytes", "sum"),
        )
        .reset_index()
    )
    summary.insert(len(keys) + 2, "calls_per_process", summary["calls"] / summary["processes"])
    return summary
