"""`rlbench predict`: stage table and JSON from the work-depth model, sweeps ranked, bad input refused."""

from __future__ import annotations

import json

from tests.conftest import run_cli

BASE = (
    "predict",
    "--model-config",
    "Qwen/Qwen2.5-7B-Instruct",
    "--workload",
    "math-grpo",
    "--hardware",
    "H100-SXM",
    "--gpus",
    "8",
)


def test_json_has_the_documented_keys():
    result = run_cli(*BASE, "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    for key in ("step_time_s", "tokens_per_s", "mfu", "memory_per_gpu_gb", "cost_per_mtok_usd", "brent"):
        assert key in data
    names = [s["name"] for s in data["stages"]]
    assert names[:2] == ["generation_prefill", "generation_decode"] and "weight_sync" in names
    for stage in data["stages"]:
        assert {"name", "flops", "bytes", "comm_bytes", "time_s"} <= set(stage)
    assert data["brent"]["lower_s"] <= data["step_time_s"]
    # Datasheet GPU rows state no per-op latency, so the depth term (and Brent's upper bound) is unknown.
    assert data["brent"]["upper_s"] is None


def test_table_for_humans():
    result = run_cli(*BASE)
    assert result.returncode == 0 and "generation_decode" in result.stdout and "step time" in result.stdout


def test_sweep_is_ranked_and_lists_what_it_skipped():
    result = run_cli(*BASE, "--sweep", "tp=1,2,4", "--sweep", "placement=colocated,disaggregated", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    times = [row["step_time_estimate_s"] for row in data["ranked"]]
    assert len(times) + len(data["skipped"]) == 6 and times == sorted(times)


MOE = (
    "predict",
    "--model-config",
    "Qwen3-30B-A3B",
    "--workload",
    "math-grpo",
    "--hardware",
    "H100-SXM",
    "--gpus",
    "16",
)


def test_moe_sweep_ranks_the_whole_taxonomy_and_says_what_it_skipped():
    """The issue's done-when: a 30B-class MoE on 16 GPUs over tp, pp, cp, ep, rollout_tp and placement."""
    data = json.loads(run_cli(*MOE, "--sweep", "all", "--json").stdout)
    ranked, skipped = data["ranked"], data["skipped"]
    assert ranked and [r["rank"] for r in ranked] == list(range(1, len(ranked) + 1))
    times = [r["step_time_estimate_s"] for r in ranked]
    assert times == sorted(times)
    # Every axis is swept at sweep_layouts' defaults: 4 tp x 3 pp x 3 cp x 4 ep x 4 rollout_tp x 2 placements.
    assert len(ranked) + len(skipped) == 4 * 3 * 3 * 4 * 4 * 2
    assert {r["layout"]["ep"] for r in ranked} > {1} and {r["layout"]["placement"] for r in ranked} == {
        "colocated",
        "disaggregated",
    }
    checks = {s["check"] for s in skipped}
    assert {"heads", "gpus", "memory"} <= checks
    heads = next(s for s in skipped if s["check"] == "heads")
    assert heads["layout"]["tp"] == 8 and "4 KV heads" in heads["reason"]  # Qwen3-30B-A3B: 4 KV heads
    text = run_cli(*MOE, "--sweep", "all")
    assert text.returncode == 0, text.stderr
    out = text.stdout
    assert f"ranked {len(ranked)} layouts; skipped {len(skipped)}:" in out
    assert "more for memory (--json lists every one)" in out
    assert len(out.splitlines()) < len(ranked) + 30  # a count per check and the first few, not every skip
    for label in ("bound s", "estimate s", "MFU bound", "not an estimate of a run's MFU"):
        assert label in out


def test_a_sweep_axis_narrows_and_a_framework_skips_what_it_refuses():
    data = json.loads(
        run_cli(
            *MOE, "--sweep", "ep=1,2,4", "--sweep", "tp=2", "--parallel", "pp=2", "--parallel", "rollout_tp=4", "--json"
        ).stdout
    )
    layouts = [r["layout"] for r in data["ranked"]] + [s["layout"] for s in data["skipped"]]
    assert sorted(l["ep"] for l in layouts) == [1, 2, 4]
    assert all((l["tp"], l["pp"], l["rollout_tp"], l["placement"]) == (2, 2, 4, "colocated") for l in layouts)
    virtual = json.loads(
        run_cli(
            *MOE,
            "--sweep",
            "pp=2,4",
            "--parallel",
            "pp_virtual=3",
            "--parallel",
            "tp=2",
            "--parallel",
            "ep=2",
            "--parallel",
            "rollout_tp=4",
            "--json",
        ).stdout
    )
    swept = [r["layout"] for r in virtual["ranked"]] + [s["layout"] for s in virtual["skipped"]]
    assert virtual["ranked"] and sorted(l["pp"] for l in swept) == [2, 4]
    assert all(r["pp"] == f"{r['layout']['pp']}x3" for r in virtual["ranked"])  # the table's pp x pp_virtual
    refused = json.loads(
        run_cli(
            *MOE, "--sweep", "ep=1,2", "--parallel", "tp=2", "--parallel", "pp=2", "--framework", "openrlhf", "--json"
        ).stdout
    )
    assert not refused["ranked"]  # OpenRLHF has no pipeline: every layout is refused, with its reason
    assert {s["check"] for s in refused["skipped"]} == {"framework"}
    assert all("pp=2: OpenRLHF trains with DeepSpeed ZeRO" in s["reason"] for s in refused["skipped"])
    verl = json.loads(
        run_cli(
            *MOE,
            "--sweep",
            "placement=colocated,disaggregated",
            "--parallel",
            "pp=4",
            "--parallel",
            "tp=2",
            "--parallel",
            "ep=2",
            "--parallel",
            "rollout_tp=4",
            "--framework",
            "verl",
            "--json",
        ).stdout
    )  # verl separates rollout GPUs only in its async trainers
    assert [r["layout"]["placement"] for r in verl["ranked"]] == ["colocated"]
    assert [(s["layout"]["placement"], s["check"]) for s in verl["skipped"]] == [("disaggregated", "framework")]


def test_a_single_layout_maps_every_knob_and_a_framework_refuses_what_run_would():
    data = json.loads(
        run_cli(
            *MOE,
            "--parallel",
            "tp=2",
            "--parallel",
            "pp=2",
            "--parallel",
            "pp_virtual=2",
            "--parallel",
            "ep=2",
            "--parallel",
            "rollout_tp=4",
            "--parallel",
            "async=2",
            "--parallel",
            "placement=disaggregated",
            "--json",
        ).stdout
    )
    assert data["async"]["depth"] == 2 and data["gpus"] == 16
    # the trainer's 8 GPUs (half go to the rollout) as tp 2 x pp 2 x dp 2 with ep 2: each knob's collective
    update = next(stage for stage in data["stages"] if stage["name"] == "actor_update")
    assert {"tp_all_reduce", "pp_send", "ep_all_to_all"} <= set(update["comm_bytes"])
    result = run_cli(*MOE, "--parallel", "ep=2", "--framework", "trl")
    assert result.returncode == 2 and result.stderr.startswith("error: --parallel ep=2: TRL 1.16 has no expert")
    result = run_cli(*MOE, "--sweep", "fuse=ref_old")
    assert result.returncode == 2 and "--sweep 'fuse=ref_old': expected all, or KNOB=V1,V2" in result.stderr


def test_bad_input_is_one_line_exit_2():
    result = run_cli(*BASE[:-3], "H2000", "--gpus", "8")
    assert result.returncode == 2 and "did you mean 'H200'" in result.stderr and "Traceback" not in result.stderr
    result = run_cli(*BASE, "--sweep", "tq=1,2")
    assert result.returncode == 2 and result.stderr.startswith("error: --sweep 'tq=1,2'")


def test_framework_launch_shape_on_a_gpu_row_without_its_floor():
    result = run_cli(*BASE, "--framework", "verl", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert "--framework verl: its launch shape is used; no framework floor on H100-SXM" in data["notes"][0]
    assert all(stage["floor_s"] == 0.0 for stage in data["stages"])
    assert data["estimate_terms"]["engine_mode"] == "cuda_graphs"  # verl's vLLM, CUDA graphs (enforce_eager off)


def test_trl_on_a_gpu_row_is_its_gpu_launch_at_the_dp_the_gpus_give():
    """Planned from this CPU machine: vLLM with CUDA graphs (TRL's GPU environment), and a per-device micro-batch
    of the mini-batch over dp = 8, as `--parallel dp=8` states it."""
    trl = (*BASE[:4], "gsm8k-grpo", *BASE[5:], "--framework", "trl", "--json")  # TRL runs GRPO only

    def plan(*extra: str) -> dict:
        result = run_cli(*trl, *extra)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    derived, stated = plan(), plan("--parallel", "dp=8")
    assert derived["estimate_terms"]["engine_mode"] == "cuda_graphs"
    assert derived["memory_per_gpu_gb"] == stated["memory_per_gpu_gb"] < 80
    assert derived["step_time_estimate_s"] == stated["step_time_estimate_s"]


def test_bound_and_estimate_are_both_given_and_labelled():
    result = run_cli(*BASE, "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["step_time_bound_s"] < data["step_time_estimate_s"]
    assert data["mfu_estimate"] < data["mfu_bound"]
    assert "neutral launch shape, token-packed micro-batches of 16384 tokens" in data["notes"][0]
    text = run_cli(*BASE).stdout
    for label in ("  bound ", "  estimate ", "MFU bound", "MFU estimate", "estimate s"):
        assert label in text


def test_predict_refuses_a_dp_that_disagrees_with_gpus_and_an_implausible_gpu_count():
    base = ["predict", "--workload", "gsm8k-grpo", "--hardware", "H100-SXM", "--model-config", "Qwen2.5-0.5B-Instruct"]
    result = run_cli(*base, "--gpus", "8", "--parallel", "dp=4")
    assert result.returncode == 2 and "dp=4 does not agree with --gpus 8" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert run_cli(*base, "--gpus", "8", "--parallel", "dp=8").returncode == 0  # a dp that agrees is honoured
    result = run_cli(*base, "--gpus", "200000")
    assert result.returncode == 2 and "200000 is not in the range" in result.stderr


def test_a_fixed_etp_reaches_every_swept_layout():
    """--parallel etp=1 folds tp into ep in each layout: tp=2 with ep=16 on 16 GPUs needs the tp ranks."""
    sweep = ("--sweep", "tp=1,2", "--sweep", "ep=16", "--sweep", "rollout_tp=4", "--json")
    folded = json.loads(run_cli(*MOE, *sweep, "--parallel", "etp=1").stdout)
    assert sorted(r["layout"]["tp"] for r in folded["ranked"]) == [1, 2]
    plain = json.loads(run_cli(*MOE, *sweep).stdout)
    refused = next(s for s in plain["skipped"] if s["layout"]["tp"] == 2)
    assert "ep=16: must divide dp*sp*cp = 8" in refused["reason"] and "etp=1" in refused["reason"]


def test_lengths_change_the_decode_depth_and_a_record_gives_its_own():
    """--lengths prices a distribution instead of every response at the cap; --lengths-from reads a record."""
    from pathlib import Path

    at_cap = json.loads(run_cli(*BASE, "--json").stdout)
    given = run_cli(*BASE, "--lengths", "mean=600,p90=1200", "--json")
    assert given.returncode == 0, given.stderr
    data = json.loads(given.stdout)
    assert data["step_time_estimate_s"] < at_cap["step_time_estimate_s"]
    assert any("mean 600, p90 1200" in note for note in data["notes"])
    record = Path(__file__).parents[1] / "data" / "records" / "trl-tiny"
    measured = run_cli(*BASE, "--lengths-from", str(record))
    assert measured.returncode == 0, measured.stderr
    assert f"response lengths from --lengths-from {record}" in measured.stdout
    both = run_cli(*BASE, "--lengths", "mean=600,p90=1200", "--lengths-from", str(record))
    assert both.returncode == 2 and both.stderr.strip().splitlines() == [
        "error: --lengths and --lengths-from both give the response lengths; keep one"
    ]
