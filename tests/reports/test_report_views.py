"""The report's views: per-step timeline, measured vs predicted scatter, roofline, sweep grid, per-step curves.

Fast tests check each view's table against hand-computed numbers on small records, and that a
view whose data is missing is skipped with its reason. The slow ones render a report of a real
TRL run (and a sweep index around it) in system Chromium: every view is drawn, hover titles
answer the pointer, a sortable table sorts, and the console stays clean.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from rlbench.harness.record.run_record import write_run_json
from rlbench.harness.record.store import summarize, write_steps
from rlbench.harness.record.sweep_index import save_index
from rlbench.reports.curves import curves_view
from rlbench.reports.html import render_report
from rlbench.reports.load import RunView, load_runs
from rlbench.reports.roofline import roofline_points, roofline_view
from rlbench.reports.scatter import prediction_points, vs_model_scatter
from rlbench.reports.svg import Tips
from rlbench.reports.sweep_views import find_sweeps, grid_rows, swept_axes
from rlbench.reports.timeline import stage_bars, timeline_view
from rlbench.workloads.catalog import load_workload
from tests.conftest import report_page

T0 = 1_800_000_000.0


def _prediction() -> dict:
    """A prediction.json in the runner's shape: two generation stages, an update, both kinds of prediction."""
    stage = {"gpus": 1, "achievable": 1.0}
    return {
        "available": True,
        "hardware": "cpu",
        "gpus": 1,
        "achievable": 1.0,
        "peak_flops_per_device": 1e11,
        "step_time_bound_s": 0.5,
        "step_time_estimate_s": 0.8,
        "stages": [
            {
                **stage,
                "name": "generation_prefill",
                "flops": 4e9,
                "bytes": 1e8,
                "memory_time_s": 1e8 / 1e10,
                "bound_s": 0.04,
                "estimate_s": 0.05,
            },
            {
                **stage,
                "name": "generation_decode",
                "flops": 1e9,
                "bytes": 4e8,
                "memory_time_s": 4e8 / 1e10,
                "bound_s": 0.06,
                "estimate_s": 0.15,
            },
            {
                **stage,
                "name": "actor_update",
                "flops": 3e10,
                "bytes": 1e9,
                "memory_time_s": 1e9 / 1e10,
                "bound_s": 0.3,
                "estimate_s": 0.4,
            },
            {
                **stage,
                "name": "reward",
                "flops": 0.0,
                "bytes": 0.0,
                "memory_time_s": 0.0,
                "bound_s": 0.0,
                "estimate_s": 0.0,
            },
        ],
    }


def _view(
    steps: pd.DataFrame | None = None,
    prediction: dict | None = None,
    summary: dict | None = None,
    telemetry: pd.DataFrame | None = None,
    label: str = "trl · tiny",
) -> RunView:
    record = {
        "status": "succeeded",
        "framework": {"name": "trl"},
        "workload": {"name": "tiny", "warmup_steps": 1},
        "parallel": {},
        "summary": summary or {},
        "environment": {"cpu_count": 2},
    }
    return RunView(
        path=Path("/nonexistent"),
        record=record,
        steps=steps,
        telemetry=telemetry,
        comm=None,
        prediction=prediction,
        label=label,
    )


def _steps() -> pd.DataFrame:
    starts = [T0, T0 + 2.0, T0 + 3.0]
    return pd.DataFrame(
        {
            "step": [1, 2, 3],
            "step_start_unix_s": starts,
            "step_end_unix_s": [s + d for s, d in zip(starts, [2.0, 1.0, 1.0])],
            "step_time_s": [2.0, 1.0, 1.0],
            "time_gen_s": [1.5, 0.5, 0.4],
            "time_reward_s": [0.1, 0.1, math.nan],
            "time_update_actor_s": [0.3, 0.3, 0.5],
            "tokens_per_s": [100.0, 200.0, 210.0],
            "reward_mean": [0.0, 0.5, 0.25],
            "proc_cpu_util_mean_pct": [150.0, 190.0, 180.0],
        }
    )


def _summary(**medians: float) -> dict:
    return {name: {"median": value, "std": 0.0, "n": 2, "mean": value} for name, value in medians.items()}


def test_stages_are_laid_end_to_end_from_the_step_start_in_pipeline_order():
    bars = stage_bars(_view(_steps()))
    step2 = bars[bars["step"] == 2].set_index("stage")
    assert list(step2.index) == ["step", "gen", "reward", "update_actor"]
    assert step2.loc["gen", "start_s"] == T0 + 2.0 and step2.loc["gen", "end_s"] == T0 + 2.5
    assert step2.loc["reward", "start_s"] == T0 + 2.5
    assert step2.loc["update_actor", "start_s"] == pytest.approx(T0 + 2.6)
    assert step2.loc["step", "seconds"] == 1.0
    assert bars[bars["step"] == 1]["warmup"].all() and not bars[bars["step"] > 1]["warmup"].any()
    assert "reward" not in set(bars[bars["step"] == 3]["stage"])  # NaN: the stage did not run


def test_prediction_points_keep_bound_and_estimate_apart_and_sum_model_stages():
    run = _view(prediction=_prediction(), summary=_summary(time_gen_s=0.2, time_update_actor_s=0.6, step_time_s=1.0))
    points = {(p["stage"], p["kind"]): p for p in prediction_points(run)}
    assert points[("gen", "bound")]["predicted_s"] == pytest.approx(0.10)  # prefill + decode
    assert points[("gen", "estimate")]["predicted_s"] == pytest.approx(0.20)
    assert points[("update_actor", "bound")]["measured_s"] == 0.6
    assert points[("whole step", "bound")]["predicted_s"] == 0.5
    assert points[("whole step", "estimate")]["predicted_s"] == 0.8
    assert ("reward", "bound") not in points  # no measured median: no point


def test_roofline_points_from_the_record():
    run = _view(prediction=_prediction(), summary=_summary(time_gen_s=0.25, time_update_actor_s=0.6))
    result = roofline_points(run)
    assert result["peak_flops"] == 1e11 and result["bandwidth"] == pytest.approx(1e10)
    gen = next(p for p in result["stages"] if p["stage"] == "gen")
    assert gen["intensity"] == pytest.approx(5e9 / 5e8)
    assert gen["achieved"] == pytest.approx(5e9 / 0.25)
    assert gen["bound_flops"] == pytest.approx(5e9 / 0.10)
    assert gen["limit"] == "compute"  # intensity 10 FLOP/B = the ridge 1e11 / 1e10 -> not below it
    update = next(p for p in result["stages"] if p["stage"] == "update_actor")
    assert update["achieved"] == pytest.approx(3e10 / 0.6) and update["limit"] == "compute"
    no_peak = {**_prediction(), "peak_flops_per_device": None}
    assert roofline_points(_view(prediction=no_peak, summary=_summary(time_gen_s=0.25))) is None


@pytest.mark.parametrize(
    "view, reason",
    [
        (timeline_view, "no run recorded step boundaries"),
        (vs_model_scatter, "no prediction.json"),
        (roofline_view, "no prediction.json"),
    ],
)
def test_a_view_without_its_data_is_skipped_with_the_reason(view, reason):
    bare = _view(pd.DataFrame({"step": [1, 2], "step_time_s": [1.0, 1.0]}))
    result = view([bare])
    assert result.svg is None and reason in result.reason and bare.label in result.reason


def test_curves_without_per_step_metrics_are_skipped_and_a_run_without_one_is_named():
    assert "no run logged" in curves_view([_view(pd.DataFrame({"step": [1]}))]).reason
    with_reward = _view(_steps(), label="a")
    without = _view(_steps().drop(columns=["reward_mean"]), label="b")
    drawn = curves_view([with_reward, without])
    assert drawn.svg and "b: no reward_mean per step" in drawn.notes


def test_svg_titles_and_ids_are_unique_per_figure():
    pages = []
    for key in ("one", "two"):
        fig, ax = plt.subplots()
        tips = Tips(key)
        (line,) = ax.plot([1, 2], [1, 2])
        tips.tip(line, "a <b> & c")
        tips.tip(ax.axvspan(0, 1, alpha=0), "zone", zone=True)
        pages.append(tips.svg(fig))
    assert "<title>a &lt;b&gt; &amp; c</title>" in pages[0] and not pages[0].startswith("<?xml")
    assert re.search(r'<g id="one-tip1"[^>]*pointer-events="all"', pages[0])
    ids = [i for page in pages for i in re.findall(r'\bid="([^"]+)"', page)]
    assert len(ids) == len(set(ids))
    referenced = set(re.findall(r'(?:url\(#|href="#)([^)"]+)', pages[1]))
    assert referenced and all(r.startswith("two-") for r in referenced)
    with pytest.raises(ValueError):
        Tips("bad key")


def _record(folder: Path, step_times: list[float]) -> Path:
    """A succeeded TRL record with steps only (no telemetry, no prediction): the views must skip, not crash."""
    import dataclasses

    folder.mkdir(parents=True)
    workload = dataclasses.asdict(load_workload("gsm8k-grpo-tiny").with_steps(len(step_times)))
    steps = pd.DataFrame(
        {
            "step": range(1, len(step_times) + 1),
            "step_time_s": step_times,
            "wall_step_time_s": step_times,
            "tokens_per_s": [1000 / t for t in step_times],
        }
    )
    write_run_json(
        folder,
        {
            "status": "succeeded",
            "framework": {"name": "trl"},
            "workload": workload,
            "parallel": {"dp": 1},
            "started_at": "2026-01-01T00:00:00+00:00",
            "summary": summarize(steps, workload["warmup_steps"]),
        },
    )
    write_steps(folder, steps)
    return folder


def test_a_report_of_records_without_telemetry_or_prediction_states_why_each_view_is_missing(tmp_path):
    _record(tmp_path / "runs" / "20260101T000000Z-trl-gsm8k-grpo-tiny-aaaaaa", [3.0, 1.0, 1.2])
    damaged = _record(tmp_path / "runs" / "20260101T000001Z-trl-gsm8k-grpo-tiny-bbbbbb", [2.0, 1.0])
    (damaged / "prediction.json").write_text("{truncated")
    warnings: list[str] = []
    html = render_report([tmp_path / "runs"], tmp_path / "r.html", warn=warnings.append).read_text()
    assert "Not drawn: no run recorded step boundaries" in html
    assert "Not drawn: no run has a measured stage with a prediction" in html
    assert html.count('<svg class="figure"') == 1  # the curves: steps are all they need
    assert any("prediction.json is not valid JSON" in w for w in warnings)  # the damaged record: named, left out
    assert "bbbbbb" in html and "damaged record" in html


def _sweep_around(run_dir: Path, folder: Path) -> Path:
    """A sweep folder holding a copy of a real record as its one succeeded cell, beside a refused and a failed one."""
    sweep = folder / "20260101T000000Z-sweep-abc123"
    shutil.copytree(run_dir, sweep / run_dir.name)
    cell = {
        "framework": "trl",
        "workload": "gsm8k-grpo-tiny",
        "repeat": 1,
        "previous_records": [],
        "executor": {"kind": "local"},
        "error": None,
        "started_at": None,
        "ended_at": None,
    }
    save_index(
        sweep,
        {
            "sweep_id": sweep.name,
            "status": "finished",
            "created_at": "2026-01-01T00:00:00+00:00",
            "request": {
                "frameworks": ["trl"],
                "workloads": ["gsm8k-grpo-tiny"],
                "grid": {"dp": ["1", "2"], "placement": ["colocated", "disaggregated"]},
            },
            "cells": [
                {
                    **cell,
                    "id": "c000",
                    "parallel": {"dp": "1", "placement": "colocated"},
                    "status": "succeeded",
                    "reason": None,
                    "record": run_dir.name,
                },
                {
                    **cell,
                    "id": "c001",
                    "parallel": {"dp": "1", "placement": "disaggregated"},
                    "status": "failed",
                    "reason": "oom: CUDA out of memory",
                    "record": None,
                },
                {
                    **cell,
                    "id": "c002",
                    "parallel": {"dp": "2", "placement": "colocated"},
                    "status": "refused",
                    "reason": "--parallel dp=2: needs 2 GPUs, this machine has 0",
                    "record": None,
                },
            ],
        },
    )
    return sweep


def test_sweep_grid_lists_every_cell_with_its_status_and_reason(tmp_path):
    run_dir = _record(tmp_path / "src" / "20260101T000000Z-trl-gsm8k-grpo-tiny-aaaaaa", [3.0, 1.0, 1.2])
    sweep_dir = _sweep_around(run_dir, tmp_path / "out")
    runs = load_runs([sweep_dir])
    notes: list[str] = []
    sweeps = find_sweeps([sweep_dir], runs, notes)
    assert notes == [] and len(sweeps) == 1 and list(sweeps[0].runs) == ["c000"]
    assert swept_axes(sweeps[0]) == {"dp": ["1", "2"], "placement": ["colocated", "disaggregated"]}
    headers, rows = grid_rows(sweeps[0])
    by_id = {row[0]: dict(zip(headers, row)) for row in rows}
    assert by_id["c002"]["status"] == "refused" and "needs 2 GPUs" in by_id["c002"]["reason"]
    assert by_id["c001"]["status"] == "failed" and by_id["c000"]["step time (s) ↓"] == "1.1"
    (sweep_dir / "sweep.json").write_text("[")  # damaged: noted, the records still report
    warnings: list[str] = []
    html = render_report([sweep_dir], tmp_path / "r.html", warn=warnings.append).read_text()
    assert any("damaged sweep index" in w for w in warnings) and "damaged sweep index" in html


# ---- a real run, rendered in a real browser -------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_report(tmp_path_factory, report_run) -> Path:
    folder = tmp_path_factory.mktemp("views-input")
    _sweep_around(report_run, folder)
    return render_report([folder], tmp_path_factory.mktemp("views") / "report.html")


@pytest.mark.slow
def test_every_view_of_a_real_run_is_drawn_with_hover_values(real_report, report_run):
    html = real_report.read_text()
    for title in (
        "Per-step curves",
        "Per-step timeline",
        "Measured vs predicted, log-log",
        "Roofline per stage",
        "each metric against each swept axis",
    ):
        assert title in html
    figures = re.findall(r'<svg class="figure".*?</svg>', html, flags=re.S)
    assert len(figures) == 5  # curves, timeline, scatter, roofline, sweep
    for figure in figures:
        assert len(re.findall(r"<title>", figure)) >= 3, figure[:200]
    record = json.loads((report_run / "run.json").read_text())
    median = record["summary"]["step_time_s"]["median"]
    assert f"whole step: measured {median:.3g} s" in html  # the scatter's hover reads the record's own median
    assert "refused: --parallel dp=2: needs 2 GPUs" in html and "failed: oom: CUDA out of memory" in html
    assert "<script>" in html and not re.search(r'(src|href)="(https?:|//)', html)


@pytest.mark.slow
def test_the_views_render_in_chromium_hover_and_sort(real_report, tmp_path):
    with report_page(real_report) as (page, problems):
        sizes = page.evaluate(
            "Array.from(document.querySelectorAll('svg.figure'))"
            ".map(s => { const r = s.getBoundingClientRect(); return [r.width, r.height]; })"
        )
        # Hover: the element under the pointer carries the <title> of what is drawn there: a timeline bar at its
        # centre, and a step's invisible span on the trace panel (near its top, above the traces).
        hovered = page.evaluate("""() => {
            const under = (group, fy) => {
                group.scrollIntoView();
                const box = group.querySelector('path').getBoundingClientRect();
                const hit = document.elementFromPoint(box.x + box.width / 2, box.y + box.height * fy);
                const titled = hit && hit.closest('g[id^="timeline-tip"]');
                return titled ? titled.querySelector('title').textContent : null;
            };
            const zone = document.querySelector('g[id^="timeline-tip"][pointer-events="all"]');
            return [under(document.querySelector('g[id^="timeline-tip"]'), 0.5), under(zone, 0.03)];
        }""")
        # Sort the sweep grid by its status column, then again (reversed).
        grid = page.locator("table.sweep-grid")
        column = grid.locator("thead th").all_inner_texts().index("status")
        before = grid.locator(f"tbody tr td:nth-child({column + 1})").all_inner_texts()
        grid.locator("thead th").nth(column).click()
        ascending = grid.locator(f"tbody tr td:nth-child({column + 1})").all_inner_texts()
        grid.locator("thead th").nth(column).click()
        descending = grid.locator(f"tbody tr td:nth-child({column + 1})").all_inner_texts()
        sort_state = grid.locator("thead th").nth(column).get_attribute("aria-sort")
        shot = Path(os.environ.get("RLBENCH_SCREENSHOT_DIR", tmp_path)) / "report-views.png"
        page.screenshot(path=str(shot), full_page=True)
    assert problems == []
    assert len(sizes) == 5 and all(w > 300 and h > 150 for w, h in sizes), sizes
    bar, zone = hovered
    assert bar and re.search(r"step 1 \(warm-up\) · whole step: [\d.]+ s", bar), bar
    assert zone and re.search(r"step \d+: [\d.]+ s, framework [\d.]+ cores", zone), zone
    assert before == ["succeeded", "failed", "refused"]
    assert ascending == sorted(before) and descending == sorted(before, reverse=True)
    assert sort_state == "descending"


@pytest.mark.slow
def test_numeric_columns_sort_as_numbers(tmp_path):
    for name, times in (("aaaaaa", [3.0, 10.0, 10.0]), ("bbbbbb", [3.0, 9.0, 9.0]), ("cccccc", [3.0, 100.0, 100.0])):
        _record(tmp_path / "runs" / f"20260101T00000{len(name)}Z-trl-gsm8k-grpo-tiny-{name}", times)
    report = render_report([tmp_path / "runs"], tmp_path / "r.html")
    with report_page(report) as (page, _):
        table = page.locator("table.summary")
        table.locator("thead th").nth(2).click()  # step time (s)
        cells = table.locator("tbody tr td:nth-child(3)").all_inner_texts()
    # As text "100 ± ..." would sort before "9 ± ..."; as numbers 9 < 10 < 100.
    assert [float(c.split(" ")[0].replace(",", "")) for c in cells] == [9.0, 10.0, 100.0]


def test_a_page_with_two_sweeps_has_no_duplicate_ids(tmp_path):
    run_dir = _record(tmp_path / "src" / "20260101T000000Z-trl-gsm8k-grpo-tiny-aaaaaa", [3.0, 1.0, 1.2])
    _sweep_around(run_dir, tmp_path / "one")
    _sweep_around(run_dir, tmp_path / "two")  # the same sweep id, too: ids must still differ
    html = render_report([tmp_path / "one", tmp_path / "two"], tmp_path / "r.html").read_text()
    assert html.count("each metric against each swept axis") == 2
    ids = re.findall(r'\bid="([^"]+)"', html)
    assert ids and len(ids) == len(set(ids))
