"""NCCL debug-log parsing on lines in NCCL's real format (tests/data/nccl_coll_sample*.log; see the .md there)."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

from rlbench.harness.telemetry.nccl import COLLECTIVE_COLUMNS, nccl_env, parse_nccl_log, summarize_collectives
from rlbench.harness.telemetry.nccl_logs import read_nccl_logs

DATA = Path(__file__).parents[1] / "data"
T0 = 1796220000.0  # the timestamped sample's epoch
STEPS = pd.DataFrame({"step": [1, 2], "step_start_unix_s": [T0 + 1, T0 + 2], "step_end_unix_s": [T0 + 2, T0 + 3]})
COLL_LINE = (
    "node-c:77:77 [3] NCCL INFO AllReduce: opCount 0 sendbuff 0x7f0000000000 recvbuff 0x7f0000000000 "
    "count 8 datatype {dtype} op 0 root 0 comm 0x1 [nranks=8] stream 0x2"
)


def _sample(name: str = "nccl_coll_sample.log") -> pd.DataFrame:
    with (DATA / name).open() as lines:
        return parse_nccl_log(lines)


def test_parses_every_collective_of_two_interleaved_processes():
    table = _sample()
    assert tuple(table.columns) == COLLECTIVE_COLUMNS
    assert len(table) == 24
    assert table.groupby("pid")["rank"].unique().map(list).to_dict() == {4101: [0], 4102: [1]}
    assert table.groupby("pid")["cuda_dev"].first().to_dict() == {4101: 0, 4102: 1}
    assert sorted(table["op"].unique()) == ["AllGather", "AllReduce", "Broadcast", "Recv", "ReduceScatter", "Send"]
    assert table[table["pid"] == 4101]["opcount"].tolist() == list(range(12))  # hex "a", "b" -> 10, 11
    assert table["nranks"].eq(2).all() and table["time_unix_s"].isna().all()
    assert table["nccl_version"].isna().all()  # 2.21 prints the version to stdout without a prefix


def test_bytes_follow_the_count_semantics_of_each_op():
    table = _sample().set_index(["pid", "opcount"])
    gather = table.loc[(4101, 2)]  # AllGather, count 524288 bf16 per rank
    assert (gather["op"], gather["datatype"], gather["bytes"], gather["total_bytes"], gather["bus_bytes"]) == (
        "AllGather",
        "bfloat16",
        1048576,
        2097152,
        1048576,
    )
    scatter = table.loc[(4102, 3)]  # ReduceScatter, receive count 524288 fp32, average
    assert (scatter["redop"], scatter["bytes"], scatter["total_bytes"]) == ("avg", 2097152, 4194304)
    send, recv = table.loc[(4101, 5)], table.loc[(4102, 5)]
    assert (send["op"], send["root"], send["bytes"]) == ("Send", 1, 8192)  # root is the peer
    assert (recv["op"], recv["root"], recv["bytes"]) == ("Recv", 0, 8192)
    assert table.loc[(4101, 0)]["redop"] == "sum" and table.loc[(4101, 1)]["redop"] == ""


def test_summary_per_op_hand_computed():
    summary = summarize_collectives(_sample()).set_index("op")
    assert summary.loc["AllReduce", ["calls", "processes", "calls_per_process"]].tolist() == [16, 2, 8.0]
    # per rank: 2 x 4 B + 6 x 1 MiB; two ranks
    assert summary.loc["AllReduce", "bytes"] == 2 * (4 + 4 + 6 * 1048576)
    assert summary.loc["AllReduce", "bus_bytes"] == summary.loc["AllReduce", "bytes"]  # 2(n-1)/n = 1 at n = 2
    assert summary.loc["AllGather", ["bytes", "total_bytes", "bus_bytes"]].tolist() == [2097152, 4194304, 2097152]
    assert summary.loc["ReduceScatter", ["bytes", "total_bytes"]].tolist() == [4194304, 8388608]
    assert summary.loc["Broadcast", "bytes"] == 4194304
    assert summary.loc[["Send", "Recv"], "bytes"].tolist() == [8192, 8192]


def test_timestamped_log_ranks_from_init_and_split_lines():
    table = _sample("nccl_coll_sample_ts.log")
    assert len(table) == 9
    assert table["time_unix_s"].iloc[0] == pytest.approx(T0 + 1.05, abs=1e-6)
    assert table["nccl_version"].eq("2.28.3+cuda12.9").all()
    assert table.groupby("comm")["rank"].first().to_dict() == {"0x5587a2c41e90": 1, "0x5587a3f07c20": 0}
    gather = table.iloc[0]
    # AllGather of 1 Mi bf16 per rank on 4 ranks: 2 MiB per rank, 8 MiB gathered, 3/4 of that on the bus
    assert (gather["bytes"], gather["total_bytes"], gather["bus_bytes"]) == (2097152, 8388608, 6291456)
    assert table.iloc[-1]["bus_bytes"] == pytest.approx(8 * 2 * 3 / 4)  # int64 AllReduce, 2(n-1)/n


def test_summary_per_step_needs_and_uses_timestamps():
    summary = summarize_collectives(_sample("nccl_coll_sample_ts.log"), step_boundaries=STEPS)
    in_steps = summary[summary["step"].notna()].set_index(["step", "op"])
    for step in (1, 2):
        assert in_steps.loc[(step, "AllGather"), ["calls", "bytes"]].tolist() == [2, 2 * 2097152]
        assert in_steps.loc[(step, "ReduceScatter"), ["calls", "total_bytes"]].tolist() == [1, 16777216]
        assert in_steps.loc[(step, "AllReduce"), "calls"] == 1
    outside = summary[summary["step"].isna()]
    assert outside[["op", "calls", "bytes"]].values.tolist() == [["AllReduce", 1, 8]]
    with pytest.raises(ValueError, match="NCCL_DEBUG_TIMESTAMP_LEVELS"):
        summarize_collectives(_sample(), step_boundaries=STEPS)


def test_default_timestamp_format_needs_the_utc_offset():
    line = "[2026-12-02 13:50:06] " + COLL_LINE.format(dtype=7)
    assert math.isnan(parse_nccl_log([line])["time_unix_s"][0])  # local time, zone unknown
    assert parse_nccl_log([line], utc_offset_s=3600)["time_unix_s"][0] == pytest.approx(1796215806.0)


def test_other_lines_are_skipped_and_launcher_tags_tolerated():
    lines = [
        "[rank3]:" + COLL_LINE.format(dtype=9),  # a launcher's per-rank tag in front
        # other NCCL_COLL INFO lines (NCCL 2.30 symmetric-memory check) are not calls
        "node-c:77:77 [3] NCCL INFO SymCheck: coll AllReduce size 16 rank 3 bigOffset 0 userOffset 0 "
        "info->sendbuff 0x7f0000000000 sendWin->userPtr 0x7f0000000000",
        "",
        "node-c:77:90 [3] misc/socket.cc:50 NCCL WARN socket closed",
        "some framework output",
        COLL_LINE.format(dtype=12),  # a datatype this parser does not know yet
    ]
    table = parse_nccl_log(lines)
    assert len(table) == 2
    assert (table["bytes"][0], pd.isna(table["rank"][0])) == (16, True)
    assert table["datatype"][1] == "unknown(12)" and math.isnan(table["bytes"][1])


def test_nccl_env():
    assert nccl_env(False, "/runs/x/nccl") == {}
    env = nccl_env(True, Path("/runs/x/nccl"))
    assert env["NCCL_DEBUG"] == "INFO"
    assert set(env["NCCL_DEBUG_SUBSYS"].split(",")) == {"INIT", "COLL"}
    assert env["NCCL_DEBUG_FILE"] == "/runs/x/nccl.%h.%p"
    assert "INFO" in env["NCCL_DEBUG_TIMESTAMP_LEVELS"].split(",")
    assert "NCCL_DEBUG_FILE" not in nccl_env(True)


def test_read_nccl_logs_reads_every_process_file(tmp_path):
    shutil.copy(DATA / "nccl_coll_sample_ts.log", tmp_path / "nccl.node-b.5201")
    shutil.copy(DATA / "nccl_coll_sample.log", tmp_path / "nccl.node-a.4101")
    (tmp_path / "other.log").write_text(COLL_LINE.format(dtype=7) + "\n")
    table = read_nccl_logs(tmp_path / "nccl")
    assert len(table) == 24 + 9
    assert read_nccl_logs(tmp_path / "missing" / "nccl").empty


def _rank_lines(host: str, pid: int, rank: int, comm_id: str | None) -> list[str]:
    """One rank's INIT and AllReduce lines as NCCL 2.28 writes them (synthetic: two hosts' logs, brought together
    as a cluster run's node agents collect them)."""
    ident = f" commId {comm_id}" if comm_id else ""
    comm = f"0x55{pid:x}"
    return [
        f"{host}:{pid}:{pid + 1} [0] NCCL INFO ncclCommInitRank comm {comm} rank {rank} nranks 2 cudaDev 0 "
        f"nvmlDev 0 busId 18000{ident} - Init COMPLETE",
        f"{host}:{pid}:{pid + 1} [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x7f00 recvbuff 0x7f00 count 1024 "
        f"datatype 9 op 0 root 0 comm {comm} [nranks=2] stream 0x1",
    ]


def test_a_communicator_across_hosts_is_inter_node():
    lines = [
        *_rank_lines("node-a", 100, 0, "0xabc"),  # one data-parallel group across two machines
        *_rank_lines("node-b", 200, 1, "0xabc"),
        *_rank_lines("node-a", 101, 0, "0xdef"),  # one inside node-a
        *_rank_lines("node-a", 102, 1, "0xdef"),
        *_rank_lines("node-b", 300, 0, None),  # no commId logged: cannot tell
    ]
    table = parse_nccl_log(lines)
    assert table["scope"].tolist() == ["inter-node", "inter-node", "intra-node", "intra-node", "unknown"]
    summary = summarize_collectives(table, by=("op", "scope")).set_index("scope")
    assert summary.loc["inter-node", "calls"] == 2 and summary.loc["intra-node", "processes"] == 2
