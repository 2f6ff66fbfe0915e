"""The published-runs validation set loads, is complete, and benchmarks/validate_published.py runs on it.

Checks the data and the script, not the accuracy: the accuracy is reported (docs/perfmodel.md), never asserted.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "validate_published.py"


def _script():
    spec = importlib.util.spec_from_file_location("validate_published", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_run_states_its_source_configuration_and_measurement():
    data = _script().load_runs()
    ids = [run["id"] for run in data["runs"]]
    assert len(ids) >= 4 and len(set(ids)) == len(ids)
    assert set(data["training_subset"]) <= set(ids)  # a fitted run is named by id
    for run in data["runs"]:
        # a source that has no address (a note found through a search index) says so in `unlinked`
        assert run["source"].startswith("https://") or run.get("unlinked"), run["id"]
        assert run["recipe"].startswith("https://") or run.get("unlinked"), run["id"]
        for key in ("model", "hardware", "gpus", "placement", "async", "workload", "train", "rollout"):
            assert key in run, f"{run['id']}: {key}"
        for key in ("prompts_per_step", "group_size", "prompt_len", "response_len", "mini_batch_prompts"):
            assert key in run["workload"], f"{run['id']}: workload.{key}"
        for key in ("tp", "pp", "sharding", "gradient_checkpointing", "offload"):
            assert key in run["train"], f"{run['id']}: train.{key}"
        assert run["measured"]["step_s"] > 0


def test_the_script_prints_bound_and_estimate_for_every_run(tmp_path, capsys):
    out = tmp_path / "rows.json"
    assert _script().main(["--json", str(out)]) == 0
    printed = capsys.readouterr().out
    rows = json.loads(out.read_text())
    runs = _script().load_runs()["runs"]
    # every run is predicted, or named among those whose layout the model cannot express
    listed = printed.split("not predicted", 1)[1].splitlines()[1:] if "not predicted" in printed else []
    refused = {line.split(":")[0].strip() for line in listed}
    assert {row["run"] for row in rows} | refused == {run["id"] for run in runs}
    assert len(rows) > len(refused)
    for row in rows:
        assert 0 < row["bound_s"] <= row["estimate_s"]
        assert row["measured_over_bound"] == pytest.approx(row["measured_s"] / row["bound_s"])
        assert row["run"] in printed
    assert "meas/bound" in printed and "meas/est" in printed and "validation rows" in printed


def test_a_bad_entry_is_refused_by_name(tmp_path):
    bad = tmp_path / "runs.yaml"
    bad.write_text("version: 1\nruns: []\n")
    with pytest.raises(ValueError, match="non-empty 'runs'"):
        _script().load_runs(bad)


def test_the_fitted_terms_are_the_fit_of_the_declared_training_subset_alone():
    """overheads.FITTED is what `validate_published.py --fit` computes from the training subset, and
    changing a validation run's measurements does not move it."""
    from rlbench.harness.perfmodel.overheads import FITTED

    script = _script()
    data = script.load_runs()
    subset = data["training_subset"]
    assert subset and list(FITTED.fitted_on) == subset
    terms = script.fit(data["runs"], subset)
    for name in ("decode_step_s", "decode_token_s"):
        fitted, refitted = getattr(FITTED, name), getattr(terms, name)
        assert fitted.keys() == refitted.keys()
        for mode, value in refitted.items():
            assert fitted[mode] == pytest.approx(value, rel=0.01)
    assert FITTED.refit_bytes_per_s == pytest.approx(terms.refit_bytes_per_s, rel=0.01)
    assert FITTED.trainer_unit_s == pytest.approx(terms.trainer_unit_s, rel=0.01)
    for run in data["runs"]:
        if run["id"] not in subset:
            run["measured"] = {key: value * 3 for key, value in run["measured"].items()}
    assert script.fit(data["runs"], subset) == terms
    with pytest.raises(ValueError, match="not in the file: nope"):
        script.fit(data["runs"], ["nope"])


def test_the_decode_fit_splits_steps_from_tokens_only_where_the_runs_can_tell_them_apart():
    """_fit_decode recovers a per-step and a per-token cost from runs whose tokens per step differ, keeps both
    non-negative (a negative solution falls back to the better single term), and with one ratio of tokens to
    steps puts the excess on tokens (the one-term rule)."""
    fit_decode = _script()._fit_decode
    rows = [(4096, 204_000, 4096 * 5e-3 + 204_000 * 3e-5), (4096, 51_000, 4096 * 5e-3 + 51_000 * 3e-5)]
    step, token = fit_decode(rows)
    assert step == pytest.approx(5e-3) and token == pytest.approx(3e-5)
    # the run with more tokens missed less: a negative per-token cost is refused, the steps carry it all
    step, token = fit_decode([(4096, 204_000, 28.0), (4096, 51_000, 30.0)])
    assert token == 0.0 and step == pytest.approx(58.0 / (2 * 4096))
    step, token = fit_decode([(1000, 50_000, 5.0)])  # one run: the split cannot be told
    assert (step, token) == (0.0, pytest.approx(1e-4))
    step, token = fit_decode([(1000, 50_000, 5.0), (2000, 100_000, 10.0)])  # the same ratio: still one term
    assert (step, token) == (0.0, pytest.approx(1e-4))


def test_the_trainer_unit_fit_recovers_a_host_bound_unit_and_refuses_one_that_helps_nothing():
    """_fit_unit finds the t of rows made as max(estimate, depth x t) (to the grid's 1/1000 decade), ignores a
    compute-bound row, and gives 0 (no term) where every measured stage is at or below its estimate."""
    fit_unit = _script()._fit_unit
    t = 1.9e-3
    rows = [(max(0.1, 800 * t), [(0.1, 800)]), (max(0.5, 6000 * t), [(0.2, 3000), (0.3, 3000)]), (20.0, [(20.0, 50)])]
    assert fit_unit(rows) == pytest.approx(t, rel=0.003)
    assert fit_unit([(0.1, [(0.2, 100)])]) == 0.0
    assert fit_unit([]) == 0.0


def test_the_summary_counts_runs_within_the_targets(capsys):
    assert _script().main([]) == 0
    printed = capsys.readouterr().out
    assert "step within 30%:" in printed and "gen within 50%:" in printed


def test_pairs_differ_in_one_strategy_or_scale_and_are_judged_by_their_winner():
    """Ranking is the headline: two runs of one release, model, hardware and batch that differ in asynchrony or
    in GPU count (not both) form a pair; the estimate's speed-up and whether it names the faster side are
    reported (the accuracy itself is reported in docs/measurements/published-runs.md, never asserted)."""
    script = _script()
    base = {
        "framework": "f 1",
        "model": "m",
        "hardware": "H100-SXM",
        "gpus": 16,
        "async": "off",
        "workload": {"prompts_per_step": 8, "prompt_len": 100, "mean_response_len": 900},
    }
    off = {
        **base,
        "async": "one-step",
        "placement": "disaggregated",
        "workload": {**base["workload"], "prompt_len": 98},
    }
    assert script.pair_axis(base, off) == "async"  # the measured prompt length may differ
    assert script.pair_axis(base, {**base, "gpus": 32}) == "scale"
    assert script.pair_axis(base, {**off, "gpus": 32}) is None  # two things at once
    assert script.pair_axis(base, {**base, "framework": "f 2", "gpus": 32}) is None  # another release
    bigger_batch = {**base, "gpus": 32, "workload": {**base["workload"], "prompts_per_step": 16}}
    assert script.pair_axis(base, bigger_batch) is None

    data = script.load_runs()
    rows = script.pairs(data["runs"], set(data["training_subset"]))
    assert {r["axis"] for r in rows} == {"async", "scale"} and len(rows) >= 10
    for r in rows:
        assert r["winner_right"] == ((r["measured_speed_up"] > 1) == (r["predicted_speed_up"] > 1))
    assert "winner right in" in script.pair_table(rows)
