"""--parallel key=value parsing and validation: one meaning per knob, and old records' `tp`."""

from __future__ import annotations

import pytest

from rlbench.harness.errors import RLBenchError
from rlbench.harness.perfmodel import get_arch
from rlbench.harness.spec.parallel import (
    KNOBS,
    MEGATRON_KNOBS,
    Parallelism,
    check_expert_ranks,
    check_heads,
    check_model_split,
    knob_pairs,
    parse_parallel,
)


def test_parse_all_knobs():
    p = parse_parallel(
        [
            "dp=8",
            "tp=2",
            "rollout_tp=4",
            "pp=2",
            "pp_virtual=3",
            "cp=2",
            "ep=4",
            "etp=1",
            "sp=1",
            "placement=disaggregated",
            "fuse=ref_old",
            "async=3",
        ]
    )
    assert (p.dp, p.tp, p.rollout_tp, p.pp, p.pp_virtual, p.cp, p.ep, p.etp, p.sp) == (8, 2, 4, 2, 3, 2, 4, 1, 1)
    assert p.fuse == ("ref_old",)
    assert (p.async_, p.async_depth, p.async_mode) == ("3", 3, "k-step")
    assert p.world_size == 8 * 2 * 2 * 2  # dp x tp x pp x cp x sp; ep is carved out of dp x sp x cp
    assert p.non_default() == {
        "dp": 8,
        "tp": 2,
        "rollout_tp": 4,
        "pp": 2,
        "pp_virtual": 3,
        "cp": 2,
        "ep": 4,
        "etp": 1,
        "placement": "disaggregated",
        "fuse": "ref_old",
        "async": "3",
    }
    assert parse_parallel(knob_pairs(p.to_dict())) == p  # what a record stores parses back (sweeps rerun it)


def test_every_knob_has_one_field_and_tp_is_the_trainers():
    assert KNOBS == (
        *("dp", "tp", "rollout_tp", "pp", "pp_virtual", "cp", "ep", "etp", "sp"),
        *("placement", "fuse", "async", "partial_rollout"),
        *("nodes", "gpus_per_node"),
    )
    p = parse_parallel(["tp=2"])
    assert (p.tp, p.rollout_tp) == (2, 1)
    assert parse_parallel(["rollout_tp=2"]).tp == 1


@pytest.mark.parametrize(
    "spelling,depth,mode",
    [("off", 0, "off"), ("0", 0, "off"), ("one-step", 1, "one-step"), ("1", 1, "one-step"), ("2", 2, "k-step")],
)
def test_async_is_a_depth_with_one_spelling_each(spelling, depth, mode):
    p = parse_parallel([f"async={spelling}"])
    assert (p.async_depth, p.async_mode) == (depth, mode)
    assert p.to_dict()["async"] == {0: "off", 1: "one-step"}.get(depth, str(depth))


def test_fusions_are_the_models():
    from rlbench.harness.perfmodel.shapes import FUSIONS as MODEL_FUSIONS
    from rlbench.harness.spec.parallel import FUSIONS

    assert set(FUSIONS) == set(MODEL_FUSIONS)
    assert parse_parallel(["fuse=on_policy_old"]).to_dict()["fuse"] == "on_policy_old"


def test_defaults_are_single_device_colocated_sync():
    assert parse_parallel([]) == Parallelism()
    assert Parallelism().non_default() == {}
    assert parse_parallel(["fuse=none", "async=off"]) == Parallelism()


@pytest.mark.parametrize(
    "pair,message",
    [
        ("tpp=2", "unknown knob 'tpp'; did you mean 'tp'"),
        ("rollout-tp=2", "unknown knob 'rollout-tp'; did you mean 'rollout_tp'"),
        ("dp", "expected key=value"),
        ("dp=two", "dp must be a positive integer"),
        ("dp=0", "must be a positive integer"),
        ("cp=0", "cp=0: must be a positive integer"),
        ("placement=remote", "placement='remote': must be one of colocated, disaggregated"),
        ("async=yes", "async='yes': must be one of off, one-step, fully"),
        ("async=-1", "async='-1': must be one of off, one-step"),
        ("fuse=ref", "fuse='ref': unknown fusion; did you mean 'ref_old'"),
        ("pp_virtual=2", "pp_virtual=2: interleaving needs a pipeline"),
        ("fuse=rollout_logprobs+on_policy_old", "at most one applies"),
        ("fuse=ref_old+rollout_logprobs", "at most one applies"),
    ],
)
def test_bad_knobs_are_refused(pair, message):
    with pytest.raises(RLBenchError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_parallel([pair])


def test_trainer_tp_follows_megatrons_head_rule_and_rollout_tp_vllms():
    qwen3 = get_arch("Qwen3-30B-A3B")  # 32 heads, 4 KV heads
    check_heads(Parallelism(rollout_tp=8), qwen3, qwen3.name)  # vLLM copies each KV head to 2 ranks
    with pytest.raises(RLBenchError, match="tp=8: .* 8 does not divide its 4 KV heads, so Megatron cannot split it"):
        check_heads(Parallelism(tp=8), qwen3, qwen3.name)
    check_heads(Parallelism(cp=8), qwen3, qwen3.name)  # the ring splits the sequence, not heads


def test_experts_and_layers_bound_ep_and_pp():
    qwen3 = get_arch("Qwen3-30B-A3B")  # 128 experts, 48 layers
    check_model_split(Parallelism(dp=8, ep=8, pp=4, pp_virtual=3), qwen3, qwen3.name)
    check_expert_ranks(Parallelism(dp=2, cp=2, ep=4))
    with pytest.raises(RLBenchError, match=r"ep=8: must divide dp\*sp\*cp = 4"):
        check_expert_ranks(Parallelism(dp=2, cp=2, ep=8))
    check_expert_ranks(Parallelism(dp=2, cp=2, tp=2, etp=1, ep=8))  # etp=1 folds the 2 tp ranks in
    with pytest.raises(RLBenchError, match=r"ep=16: must divide \(tp/etp\)\*dp\*sp\*cp = 2\*4 = 8"):
        check_expert_ranks(Parallelism(dp=2, cp=2, tp=2, etp=1, ep=16))
    with pytest.raises(RLBenchError, match=r"etp=3: must divide tp=2"):
        parse_parallel(["tp=2", "etp=3"])
    with pytest.raises(RLBenchError, match=r"'etp=x': etp must be a positive integer"):
        parse_parallel(["etp=x"])
    with pytest.raises(RLBenchError, match="ep=3: does not divide the 128 experts"):
        check_model_split(Parallelism(dp=3, ep=3), qwen3, qwen3.name)
    with pytest.raises(RLBenchError, match="pp=5: does not divide the 48 layers"):
        check_model_split(Parallelism(pp=5), qwen3, qwen3.name)
    dense = get_arch("Qwen2.5-7B-Instruct")
    with pytest.raises(RLBenchError, match="ep=2: model Qwen2.5-7B-Instruct is dense"):
        check_model_split(Parallelism(dp=2, ep=2), dense, dense.name)
    with pytest.raises(RLBenchError, match="ep=2: cannot check it .* huggingface-cli download m config.json"):
        check_model_split(Parallelism(dp=2, ep=2), None, "m")


def test_an_old_records_tp_is_the_rollouts():
    """Version-1 records written before the split carry {"tp": N} for the rollout engine, and no rollout_tp."""
    from rlbench.harness.record.run_record import migrate

    old = {"dp": 2, "tp": 4, "pp": 1, "sp": 1, "placement": "colocated", "async": "off"}
    moved = migrate({"schema_version": 1, "parallel": old})["parallel"]
    assert (moved["tp"], moved["rollout_tp"]) == (1, 4)
    new = Parallelism(dp=2, rollout_tp=4).to_dict()
    assert migrate({"schema_version": 1, "parallel": new})["parallel"] == new  # a later v1 record holds both
    assert migrate({"schema_version": 1, "parallel": {"dp": 1, "tp": 2, "rollout_tp": 1}})["parallel"]["tp"] == 2


def _record(parallel: dict) -> dict:
    return {
        "schema_version": 1,
        "status": "succeeded",
        "seed": 0,
        "framework": {"name": "verl"},
        "workload": {"name": "gsm8k-grpo", "version": 1, "steps": 5, "warmup_steps": 1},
        "parallel": parallel,
    }


def test_old_records_load_and_compare_with_new_ones(tmp_path):
    """An old run.json ({"tp": 2} = rollout TP) loads with today's knobs and compares with a new record."""
    import json

    from rlbench.harness.record.compare import configuration_key
    from rlbench.harness.record.read import read_record
    from rlbench.harness.record.run_record import SCHEMA_VERSION
    from rlbench.reports.load import base_label

    def read(name: str, record: dict) -> dict:
        (tmp_path / name).mkdir()
        (tmp_path / name / "run.json").write_text(json.dumps(record))
        return read_record(tmp_path / name)

    old = read("old", _record({"dp": 4, "tp": 2, "pp": 1, "sp": 1, "placement": "colocated", "async": "off"}))
    new = read("new", {**_record(Parallelism(dp=4, rollout_tp=2).to_dict()), "schema_version": SCHEMA_VERSION})
    trainer_tp = read("tp", {**_record(Parallelism(dp=4, tp=2).to_dict()), "schema_version": SCHEMA_VERSION})
    assert (old["parallel"]["tp"], old["parallel"]["rollout_tp"], old["parallel"]["cp"]) == (1, 2, 1)
    assert configuration_key(old) == configuration_key(new)
    assert configuration_key(trainer_tp) != configuration_key(old)  # trainer tp
    assert base_label(old) == base_label(new) == "verl · gsm8k-grpo · dp=4 rollout_tp=2 · seed 0"


def test_megatron_knobs_are_the_trainer_knobs_set_above_one():
    """The one answer to "needs Megatron": verl picks its backend by it, predict its trainer sharding."""
    assert Parallelism(dp=8, rollout_tp=4, sp=2).megatron_knobs == {}
    assert Parallelism(tp=2, pp=2, dp=2).megatron_knobs == {"tp": 2, "pp": 2}
    for knob in MEGATRON_KNOBS:
        assert Parallelism(**{knob: 2}).megatron_knobs == {knob: 2}
