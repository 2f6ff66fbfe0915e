"""`rlbench nightly`: run the fixed benchmark matrix, compare each run with its baseline, report.

One night is one folder `<results>/<UTC time>-night-<hex>/` holding a record per benchmark,
`nightly.json` (what ran, against which baseline, every metric's verdict) and
`report.html`; `<results>/history.html` is redrawn over every night so far.
A benchmark that fails is recorded and the matrix goes on. The night fails
(exit 1) when any benchmark failed or any metric regressed significantly beyond
the threshold (`rlbench compare`'s rule), or when a workload with a quality target learned
below its convergence reference (record.convergence: the band of the first clean runs of
its configuration in the baseline folder), even if its steps got faster; a benchmark with
no baseline yet is reported, not failed, so the first night can seed the baseline
(`--update-baseline` copies a clean night's records into it; the first five of a
configuration stay its convergence reference).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlbench.harness.errors import RLBenchError
from rlbench.harness.nightly.config import Benchmark, NightlyConfig
from rlbench.harness.out_dir import check_writable, writable_folder
from rlbench.harness.record.compare import compare_records, configuration_key, data_digest
from rlbench.harness.record.contention import contention
from rlbench.harness.record.convergence import REFERENCE_RUNS, check_text, reference_check, target_curve
from rlbench.harness.record.read import read_record
from rlbench.harness.record.schema import headline
from rlbench.harness.record.status import NightStatus, RunStatus
from rlbench.harness.record.store import RUN_FILE, new_unique_dir, utc_now, write_json

NIGHT_FILE, REPORT_FILE, HISTORY_FILE = "nightly.json", "report.html", "history.html"


def _same_configuration(baseline_dir: Path, record: dict[str, Any]) -> list[tuple[str, Path, dict[str, Any]]]:
    """(started_at, folder, record) of every succeeded baseline record of the same configuration and data."""
    if not baseline_dir.is_dir():
        return []
    key, digest, found = configuration_key(record), data_digest(record), []
    for run_json in baseline_dir.rglob(RUN_FILE):
        try:
            candidate = read_record(run_json.parent)
        except RLBenchError:
            continue  # a damaged record, or one of a newer schema: never a silent baseline
        same_data = digest is None or data_digest(candidate) in (None, digest)  # unknown in older records
        if candidate.get("status") == RunStatus.SUCCEEDED and configuration_key(candidate) == key and same_data:
            found.append((candidate.get("started_at") or "", run_json.parent, candidate))
    return sorted(found, key=lambda found: found[:2])


def find_baseline(baseline_dir: Path, record: dict[str, Any]) -> Path | None:
    """The newest succeeded baseline record of the same configuration and data, if any."""
    found = _same_configuration(baseline_dir, record)
    return found[-1][1] if found else None


def judge_reference(record: dict[str, Any], baseline_dir: Path) -> dict[str, Any] | None:
    """A target workload's curve against its convergence reference: the first `REFERENCE_RUNS` clean records of
    the same configuration and data in the baseline folder (the first nights promoted with --update-baseline,
    or a --vary-seed sweep's records copied there); None for a workload without a target."""
    target = record.get("target")
    if not isinstance(target, dict):
        return None
    metric, window = target["metric"], int(target["window"])
    reference = [(r, path) for _, path, r in _same_configuration(baseline_dir, record)][:REFERENCE_RUNS]
    curves = [target_curve(r["steps"], metric, window) for r, _ in reference]
    kept = [(c, r) for c, (r, _) in zip(curves, reference) if c is not None and not c.empty]
    curve = target_curve(record["steps"], metric, window)
    if curve is None:
        check = {"verdict": "not judged", "why": f"this run logged no {metric}", "flagged": False}
    else:
        check = reference_check(curve, [c for c, _ in kept])
    check["runs"] = [str(path) for _, path in reference]
    seeds = [r.get("seed") for _, r in kept]
    check["seeds"] = seeds
    if len(kept) > 1 and len(set(seeds)) < len(seeds):  # e.g. nights of one seed: a narrower band than seeds give
        check["note"] = "the reference runs share seeds: the band is their run-to-run spread, not the seeds'"
    check["text"] = check_text(check, metric) + (f" ({check['note']})" if check.get("note") else "")
    return check


def target_summary(target: dict[str, Any]) -> dict[str, Any]:
    """The night's view of a run's time to target: whether and where it was reached, and what that cost."""
    keys = ("metric", "value", "reached", "step", "steps_run", "seconds", "tokens", "gpu_hours", "cost_usd", "cost_why")
    return {k: target[k] for k in keys if k in target}


def target_line(target: dict[str, Any]) -> str:
    """One line: time to target, or how far the run got without reaching it."""
    head = f"time to {target['metric']} >= {target['value']:g}: "
    if not target.get("reached"):
        return head + f"not reached in {target.get('steps_run')} step(s)"
    seconds = f"{target['seconds']:.4g} s" if target.get("seconds") is not None else "no step times"
    cost = f", {target['cost_usd']:.3g} USD" if target.get("cost_usd") is not None else ""
    gpu_hours = f", {target['gpu_hours']:.3g} GPU-h" if target.get("gpu_hours") is not None else ""
    return head + f"{seconds} at step {target['step']}{gpu_hours}{cost} (one seed: no spread)"


def judge(record_dir: Path, baseline_dir: Path, threshold: float) -> dict[str, Any]:
    """Compare one finished run with its baseline: per-metric verdicts and the regressed ones; a run or baseline
    measured on a shared host is marked (`contended`, `baseline_contended`: record.contention's line)."""
    record = read_record(record_dir)
    marks = {"contended": shared} if (shared := contention(record)) else {}
    if (reference := judge_reference(record, baseline_dir)) is not None:
        marks.update(target=target_summary(record["target"]), reference=reference)
    flagged = ["convergence"] if reference and reference["flagged"] else []  # learns slower: fails the night
    baseline = find_baseline(baseline_dir, record)
    if baseline is None:
        return {
            "baseline": None,
            "comparisons": {},
            "regressed": flagged,
            "note": "no baseline of this configuration yet",
            **marks,
        }
    results = compare_records(baseline, record_dir, threshold)
    if shared := contention(read_record(baseline)):
        marks["baseline_contended"] = shared
    return {
        "baseline": str(baseline),
        "comparisons": {name: dataclasses.asdict(c) for name, c in results},
        "regressed": [name for name, c in results if c.verdict == "regressed"] + flagged,
        # too few steps to test, or a change beyond the threshold the test could not confirm: never a pass
        "undecidable": [name for name, c in results if c.verdict in ("undecidable", "inconclusive")],
        **marks,
    }


def promotion_refusal(night: dict[str, Any]) -> str | None:
    """Why `--update-baseline` must not copy this night into the baseline, or None: only a night that passed,
    measured on a host nobody else was using, may become what later nights are judged against."""
    if night["status"] != NightStatus.PASSED:
        return f"the night {night['status']}"
    contended = [e for e in night["benchmarks"] if e.get("contended")]
    if contended:
        e = contended[0]
        return f"{e['framework']} on {e['workload']} ran on a shared host ({e['contended']})"
    return None


def _run_one(bench: Benchmark, night_dir: Path, echo: Callable[[str], None]) -> dict[str, Any]:
    from rlbench.harness.run.exceptions import RunFailed, RunInterrupted
    from rlbench.harness.run.runner import execute
    from rlbench.harness.spec.runspec import build_run_spec

    entry: dict[str, Any] = {**dataclasses.asdict(bench), "record": None}
    try:
        spec = build_run_spec(
            bench.framework, bench.workload, bench.parallel, steps=bench.steps, seed=bench.seed, out=night_dir
        )
        entry.update(status=NightStatus.SUCCEEDED, record=str(execute(spec, echo=echo)))
    except RunInterrupted:
        raise
    except RunFailed as exc:
        entry.update(status=NightStatus.FAILED, error=str(exc), record=str(exc.run_dir))
    except RLBenchError as exc:  # refused before launch: unknown workload, knob, framework not installed
        entry.update(status=NightStatus.NOT_RUN, error=str(exc))
    return entry


def run_night(
    config: NightlyConfig, *, update_baseline: bool = False, echo: Callable[[str], None] = print
) -> tuple[Path, dict[str, Any]]:
    """Run the matrix into a new night folder; returns it and the night summary (also in nightly.json)."""
    from rlbench.reports.html import render_report

    writable_folder(config.results, "nightly results folder")  # refused before any benchmark runs
    if update_baseline:
        check_writable(config.baseline, "nightly baseline folder")  # not found only after a clean night
    night_dir = new_unique_dir(config.results, "night", "night")
    night: dict[str, Any] = {
        "started_at": utc_now(),
        "ended_at": None,
        "threshold": config.threshold,
        "baseline_dir": str(config.baseline),
        "status": NightStatus.RUNNING,
        "benchmarks": [],
    }
    write_json(night_dir / NIGHT_FILE, night)
    try:
        for bench in config.matrix:
            echo(f"nightly: {bench.framework} on {bench.workload} {' '.join(bench.parallel)}".rstrip())
            entry = _run_one(bench, night_dir, echo)
            if entry["status"] == NightStatus.SUCCEEDED:
                try:
                    entry.update(judge(Path(entry["record"]), config.baseline, config.threshold))
                except RLBenchError as exc:  # e.g. the new record is damaged: this benchmark failed, the night goes on
                    entry.update(status=NightStatus.FAILED, error=f"comparison with the baseline: {exc}")
            night["benchmarks"].append(entry)
            write_json(night_dir / NIGHT_FILE, night)  # a killed job still leaves what finished
    except BaseException:
        night.update(status=NightStatus.INTERRUPTED, ended_at=utc_now())
        write_json(night_dir / NIGHT_FILE, night)
        raise
    entries = night["benchmarks"]
    night.update(status=night_status(entries), ended_at=utc_now())
    records = [Path(e["record"]) for e in entries if e["record"]]
    baselines = [Path(e["baseline"]) for e in entries if e.get("baseline")]
    try:  # the verdicts are in: whatever the pages do, nightly.json ends with the night's own status
        if records:
            try:
                render_report(
                    list(dict.fromkeys(records + baselines)),
                    night_dir / REPORT_FILE,
                    warn=echo,
                    option="nightly results folder",
                    verdicts=format_night(night).splitlines(),
                )
                night["report"] = str(night_dir / REPORT_FILE)
                write_json(night_dir / NIGHT_FILE, night)  # the history's night table reads tonight's status
                render_report(
                    [config.results],
                    config.results / HISTORY_FILE,
                    history=True,
                    threshold=config.threshold,
                    warn=echo,
                    option="nightly results folder",
                    nights=night_rows(config.results),
                )
                night["history"] = str(config.results / HISTORY_FILE)
            except RLBenchError as exc:  # e.g. every old record unreadable, or the disk filled
                night["report_error"] = str(exc)
                echo(f"warning: the night's pages were not written: {exc}")
        if update_baseline:
            refusal = promotion_refusal(night)
            if refusal is None:
                night["baseline_updated"] = [str(_promote(r, config.baseline)) for r in records]
            else:
                night["baseline_refused"] = refusal
                echo(f"nightly: baseline not updated: {refusal}")
    finally:
        write_json(night_dir / NIGHT_FILE, night)
    return night_dir, night


def night_status(entries: list[dict[str, Any]]) -> str:
    """regressed > failed > undecidable > passed: the worst outcome among the night's benchmarks."""
    if any(e.get("regressed") for e in entries):
        return NightStatus.REGRESSED
    if any(e["status"] != NightStatus.SUCCEEDED for e in entries):
        return NightStatus.FAILED
    # Too few steps to decide is the matrix's fault, not a pass: a gate that cannot fail must not say "passed".
    if any(e.get("undecidable") for e in entries):
        return NightStatus.UNDECIDABLE
    return NightStatus.PASSED


def night_rows(results: Path) -> tuple[list[str], list[list[str]]]:
    """The history page's table: every night under `results`, newest first, with its status and what decided it;
    a night whose nightly.json cannot be read is listed as such, not skipped."""
    headers = ["night", "started (UTC)", "status", "benchmarks", "regressed", "undecidable or failed", "baseline"]
    rows = []
    for path in sorted(results.glob(f"*-night-*/{NIGHT_FILE}"), reverse=True):
        try:
            night = json.loads(path.read_text())
            entries = [e for e in night["benchmarks"] if isinstance(e, dict)]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            rows.append([path.parent.name, "", "unreadable", "", "", f"{type(exc).__name__}", ""])
            continue
        what = [f"{e.get('framework')} {e.get('workload')}" for e in entries]
        regressed = [f"{w}: {', '.join(e['regressed'])}" for w, e in zip(what, entries) if e.get("regressed")]
        other = [
            f"{w}: {e.get('status') if e.get('status') != NightStatus.SUCCEEDED else 'undecidable'}"
            for w, e in zip(what, entries)
            if e.get("status") != NightStatus.SUCCEEDED or e.get("undecidable")
        ]
        baseline = (
            f"refused: {night['baseline_refused']}"
            if night.get("baseline_refused")
            else "updated"
            if night.get("baseline_updated")
            else ""
        )
        rows.append(
            [
                path.parent.name,
                str(night.get("started_at") or ""),
                str(night.get("status") or "unknown"),
                str(len(entries)),
                "; ".join(regressed),
                "; ".join(other),
                baseline,
            ]
        )
    return headers, rows


def _promote(record_dir: Path, baseline_dir: Path) -> Path:
    """Copy a record into the baseline folder under a temporary name, then rename: never half a baseline."""
    baseline_dir.mkdir(parents=True, exist_ok=True)
    target, staging = baseline_dir / record_dir.name, baseline_dir / f".{record_dir.name}.staging"
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(record_dir, staging)
    staging.rename(target)
    return target


def format_night(night: dict[str, Any]) -> str:
    lines = []
    for e in night["benchmarks"]:
        what = f"{e['framework']} {e['workload']} {' '.join(e['parallel'])}".strip()
        if e["status"] != NightStatus.SUCCEEDED:
            lines.append(f"{what}: {e['status']}: {e.get('error', '')[:200]}")
        elif e.get("baseline") is None:
            lines.append(f"{what}: ok, no baseline yet")
        else:
            verdicts = ", ".join(
                f"{m} x{c['ratio']:.3f} {c['verdict']}" for m, c in e["comparisons"].items() if m in headline("nightly")
            )
            outcome = (
                "REGRESSED " + ", ".join(e["regressed"])
                if e["regressed"]
                else "UNDECIDABLE: too few post-warm-up steps, or steps too noisy, for the test to decide; raise "
                "this benchmark's steps or quiet the host"
                if e.get("undecidable")
                else "ok"
            )
            lines.append(f"{what}: {outcome} ({verdicts})")
        if e.get("target"):
            lines.append(f"  {target_line(e['target'])}")
        if e.get("reference"):
            lines.append(f"  {e['reference']['text']}")
        for key, whose in (("contended", "tonight"), ("baseline_contended", "its baseline")):
            if e.get(key):
                lines.append(f"  {whose}: {e[key]}")
    if night.get("baseline_refused"):
        lines.append(f"baseline not updated: {night['baseline_refused']}")
    lines.append(f"night {night['status']}" + (f"; report: {night['report']}" if night.get("report") else ""))
    return "\n".join(lines)
