"""`rlbench report`: render run records into one self-contained HTML file.

Everything the page needs is inside it: figures are base64 PNG or inline SVG
(whose `<title>` elements are the hover values), the stylesheet is inline, and one
small inline script sorts tables (templates/sortable.js.j2), so it opens offline in
any browser. The file is written atomically, so an interrupted report never
leaves half a page.

    render_report([Path("results")], Path("report.html"))
    render_report([Path("results/nightly")], Path("history.html"), history=True)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import jinja2

from rlbench.harness.atomic import write_bytes
from rlbench.harness.out_dir import check_replaceable_page, check_writable, unwritable
from rlbench.harness.record.read import DamagedRecord
from rlbench.harness.record.store import utc_now
from rlbench.reports import figures, tables
from rlbench.reports.across import across_frameworks
from rlbench.reports.curves import curves_view
from rlbench.reports.history import history as build_history
from rlbench.reports.hygiene import hygiene_rows
from rlbench.reports.idle_ledger import idle_rows, staleness_rows
from rlbench.reports.load import load_runs
from rlbench.reports.quality import quality_rows, quality_verdicts, quality_view
from rlbench.reports.repeats import pooled_rows
from rlbench.reports.roofline import roofline_view
from rlbench.reports.scatter import vs_model_scatter
from rlbench.reports.step_anatomy import anatomy_rows
from rlbench.reports.sweep_views import find_sweeps, grid_rows, sweep_view
from rlbench.reports.timeline import timeline_view


def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("rlbench.reports", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
    )


def _lane_caveat(runs: list) -> str | None:
    """The one sentence a reader of a CPU-lane run must see first, or None when no run used a lane."""
    lanes = sorted({str(run.record["cpu_lane"].get("lane", "?")) for run in runs if run.record.get("cpu_lane")})
    if not lanes:
        return None
    return (
        f"{len(lanes)} CPU lane(s) here ({', '.join(lanes)}): a CPU-lane run measures the framework's machinery "
        "(its processes, scheduling, data movement and stage overheads) on a tiny model on CPU, not GPU "
        "behaviour; its times and MFU say nothing about the framework's speed on GPUs."
    )


def render_report(
    paths: list[Path],
    out: Path,
    *,
    history: bool = False,
    threshold: float = 0.05,
    warn: Callable[[str], None] | None = None,
    option: str = "--out",
    not_run: list[dict[str, str]] = (),
    verdicts: list[str] | None = None,
    nights: tuple[list[str], list[list[str]]] | None = None,
) -> Path:
    """Write the comparison report (or, with `history`, the nightly history) of the records under `paths`.

    A damaged record is left out, listed on the page and passed to `warn`; the rest is reported.
    `option` names where `out` came from in an error (the CLI flag, or the nightly config's key).
    `not_run`: runs that never started, e.g. a sweep's refused cells ({"label", "status", "reason"}), listed
    with the runs that did not finish. `verdicts`: a night's lines (`rlbench nightly`), shown first; `nights`: the
    history page's table of every night and its status."""
    check_writable(out.parent, option)  # before the work: a bad --out is refused, not found at the end
    check_replaceable_page(out, option)  # never over a record's file (or any other that is not a page)
    damaged: list[DamagedRecord] = []
    runs = load_runs(list(paths), damaged)
    for skipped in damaged if warn is not None else ():
        warn(f"warning: skipped {skipped}")
    succeeded = [run for run in runs if run.record.get("status") == "succeeded"]
    across = across_frameworks(runs, threshold)
    context = {
        "lane_caveat": _lane_caveat(runs),
        "verdicts": list(verdicts or []),
        "nights": nights,
        "across": across.lines,
        "title": "rlbench history" if history else "rlbench comparison",
        "generated_at": utc_now(),
        "sources": [str(p) for p in paths],
        "run_count": len(runs),
        "summary": tables.summary_rows(runs, across.x_of_fastest),
        "failures": tables.failure_rows(runs, damaged, not_run),
        "lanes": tables.lane_rows(runs),
        "equal_work": tables.equal_work_rows(runs),
        "hygiene": hygiene_rows(runs),
        "anatomy": anatomy_rows(runs),
        "idle": idle_rows(runs),
        "staleness": staleness_rows(runs),
        "quality": quality_rows(runs),
        "quality_verdicts": quality_verdicts(runs),
        "repeats": pooled_rows(runs),
        "environment": tables.environment_rows(runs),
        "history": None,
        "figures": {},
        "vs_model": None,
        "views": {},
        "sweeps": [],
        "sweep_notes": [],
        "nodes": [],
    }
    if history:
        series = build_history(succeeded, threshold)
        context["history"] = {
            "series": series,
            "figure": figures.history_figure(series),
            "changes": [(s, c) for s in series for c in s.changes],
            "threshold": threshold,
        }
    else:
        context["figures"] = figures.all_figures(succeeded)
        context["vs_model"] = tables.vs_model_rows(succeeded)
        context["nodes"] = tables.node_tables(runs)  # failed runs too: an idle node may be why one hung
        context["views"] = {
            "curves": curves_view(succeeded),
            "quality": quality_view(runs),
            "timeline": timeline_view(succeeded),
            "scatter": vs_model_scatter(succeeded),
            "roofline": roofline_view(succeeded),
        }
        sweeps = find_sweeps(list(paths), runs, context["sweep_notes"])
        context["sweeps"] = [(sweep_view(sweep, n), grid_rows(sweep)) for n, sweep in enumerate(sweeps)]
        for note in context["sweep_notes"] if warn is not None else ():
            warn(f"warning: {note}")
    html = _environment().get_template("report.html.j2").render(**context)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        write_bytes(out, html.encode("utf-8"))
    except OSError as exc:  # e.g. the disk filled while the figures were drawn
        raise unwritable(out.parent, exc, option) from None
    out.chmod(0o644)  # a report is for sharing (mkstemp creates files 0600)
    return out
