"""`rlbench report` on real run records: a self-contained page, and a real browser loads it cleanly.

The records come from a real TRL tiny run on CPU (`report_run`); the failed one
is a copy whose run.json says what a crashed run's says.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from rlbench.reports.html import render_report
from tests.conftest import report_page, run_cli

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def results(tmp_path_factory, report_run) -> Path:
    folder = tmp_path_factory.mktemp("report-input")
    shutil.copytree(report_run, folder / report_run.name)
    failed = folder / "20990101T000000Z-trl-gsm8k-grpo-tiny-failed"
    shutil.copytree(report_run, failed)
    record = json.loads((failed / "run.json").read_text())
    record.update(
        status="failed",
        error={"kind": "oom", "message": "CUDA out of memory", "log_tail": []},
        started_at="2099-01-01T00:00:00+00:00",
    )
    (failed / "run.json").write_text(json.dumps(record))
    return folder


@pytest.fixture(scope="module")
def report(results, tmp_path_factory) -> Path:
    return render_report([results], tmp_path_factory.mktemp("report") / "report.html")


def test_report_holds_every_section_with_embedded_figures(report, report_run):
    html = report.read_text()
    for heading in (
        "Summary",
        "Per-stage time breakdown",
        "Measured vs predicted",
        "Utilisation and power",
        "Communication",
        "Environment",
        "Runs that did not finish",
    ):
        assert f"<h2>{heading}</h2>" in html
    figures = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert len(figures) == 3  # stages, vs model, telemetry; no NCCL on one CPU process
    assert "tokens/s" in html and "↑" in html and "↓" in html
    assert "CUDA out of memory" in html and report_run.name in html
    # Self-contained: nothing is fetched from anywhere.
    assert not re.search(r'(src|href)="(https?:|//)', html)
    assert not [p for p in report.parent.iterdir() if p.name.startswith(".")]  # no temp file left


def test_summary_values_come_from_the_record(report, report_run):
    record = json.loads((report_run / "run.json").read_text())
    median = record["summary"]["step_time_s"]["median"]
    n = record["summary"]["step_time_s"]["n"]
    assert n == 2  # 3 steps, 1 warm-up
    shown = f"{median:.3g}" if median < 100 else f"{median:,.0f}"
    assert f"{shown} ± " in report.read_text()


def test_a_real_browser_renders_the_report_without_errors(report, tmp_path):
    with report_page(report) as (page, problems):
        sizes = page.evaluate("Array.from(document.images).map(i => [i.complete, i.naturalWidth, i.naturalHeight])")
        shot = Path(os.environ.get("RLBENCH_SCREENSHOT_DIR", tmp_path)) / "report.png"
        page.screenshot(path=str(shot), full_page=True)
    assert problems == []
    assert len(sizes) == 3 and all(done and w > 300 and h > 100 for done, w, h in sizes)
    assert shot.stat().st_size > 50_000  # a page with figures, not a blank one


def test_report_cli_writes_the_page(results, tmp_path):
    out = tmp_path / "sub" / "r.html"
    result = run_cli("report", str(results), "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip()) == out and out.read_text().startswith("<!DOCTYPE html>")


def test_report_cli_refuses_folders_without_records(tmp_path):
    result = run_cli("report", str(tmp_path), "--out", str(tmp_path / "r.html"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().startswith("error: no run records") and len(result.stderr.strip().splitlines()) == 1
    result = run_cli("report", str(tmp_path / "missing"))
    assert result.returncode == 2 and "no such folder" in result.stderr
    assert not (tmp_path / "r.html").exists()


def test_report_cli_names_an_unreadable_record(tmp_path):
    broken = tmp_path / "20260101T000000Z-trl-x-abc123"
    broken.mkdir()
    (broken / "run.json").write_text("{not json")
    result = run_cli("report", str(tmp_path), "--out", str(tmp_path / "r.html"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "no readable run record" in result.stderr and f"{broken}: damaged run record" in result.stderr
    assert not (tmp_path / "r.html").exists()


def test_report_never_writes_over_a_record(report_run, tmp_path):
    """`--out RECORD/run.json` would have replaced the record with HTML; it is refused and the record kept. A
    page written earlier is replaced as before."""
    record = (report_run / "run.json").read_bytes()
    result = run_cli("report", str(report_run), "--out", str(report_run / "run.json"))
    assert result.returncode == 2 and (report_run / "run.json").read_bytes() == record
    assert result.stderr.strip().splitlines() == [result.stderr.strip().splitlines()[-1]]
    assert "is not an HTML page" in result.stderr and "Traceback" not in result.stderr
    page = tmp_path / "r.html"
    for _ in range(2):
        assert run_cli("report", str(report_run), "--out", str(page)).returncode == 0


def test_a_run_json_that_is_a_folder_is_named_and_skipped(report_run, tmp_path):
    """It stopped the whole report (exit 2); the other records are reported and it is listed as damaged."""
    results = tmp_path / "results"
    shutil.copytree(report_run, results / report_run.name)
    (results / "odd" / "run.json").mkdir(parents=True)
    result = run_cli("report", str(results), "--out", str(tmp_path / "r.html"))
    assert result.returncode == 0, result.stderr
    assert "skipped" in result.stderr and "run.json is a folder, not a file" in result.stderr
    assert "run.json is a folder" in (tmp_path / "r.html").read_text()
