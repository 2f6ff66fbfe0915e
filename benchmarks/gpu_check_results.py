"""Judge and publish the GPU check's output folder (benchmarks/gpu_check.sh).

`summarize` runs on the GPU machine at the end of the check: it reads the run records and the
probe and writes `summary.json`, one pass/fail per point 3 of issue 22:
* nvml_sampling: NVML rows at the sampler's rate (median interval within 25% of 1/rate_hz, under
  5% missed ticks) with nonzero power and GPU utilisation in every post-warm-up step;
* step_energy: per-step energy from NVML's counter positive, and the median over post-warm-up
  steps of energy / (mean power x step time) within 10% of 1;
* mfu: rlbench's own MFU finite and in (0, 1) in every post-warm-up step;
* peak_memory: torch's peak allocated device memory recorded (> 0) in every post-warm-up step;
* sampler_overhead: median step time with the sampler / without it, the tiny workload run
  alternately in the same window; passes when enough steps decide it (Mann-Whitney) and it is
  not a slowdown beyond 5% (rlbench.harness.record.regression's rule, as `rlbench compare` applies it).
Each of the first four is judged on the two main runs (tiny and qwen05b). `publish` runs here
on the returned folder: it recomputes the summary from the records, writes a dated entry in
docs/measurements/, the measured GPU constants in harness/perfmodel/measured/ (read by
rlbench.harness.perfmodel.gpu_measured), and measured/predicted per stage for the two runs.

    python benchmarks/gpu_check_results.py summarize RECORDS --probe gpu_probe.json --out summary.json
    python benchmarks/gpu_check_results.py publish OUT_DIR
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tarfile
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
MAIN_ROLES = ("tiny", "qwen05b")  # the check's two runs; sampler-on / sampler-off hold the comparison's
RATE_TOLERANCE = 0.25  # median NVML interval within 25% of 1/rate_hz
MISSED_TICKS_MAX = 0.05
ENERGY_TOLERANCE = 0.10  # the 10%
SAMPLER_THRESHOLD = 0.05


def find_records(root: Path) -> dict[str, list[Path]]:
    """{role: [record folders]} from ROOT/<role>/<record>/run.json, records in start order."""
    found: dict[str, list[Path]] = {}
    for run_json in sorted(root.glob("*/*/run.json")):
        found.setdefault(run_json.parent.parent.name, []).append(run_json.parent)
    return found


def load(record: Path) -> dict[str, Any]:
    """run.json, post-warm-up steps and GPU telemetry rows of one record."""
    run = json.loads((record / "run.json").read_text())
    steps = pd.read_parquet(record / "steps.parquet") if (record / "steps.parquet").is_file() else pd.DataFrame()
    warmup = int(run.get("workload", {}).get("warmup_steps", 0))
    if "step" in steps:
        steps = steps[steps["step"] > warmup]
    telemetry = record / "telemetry.parquet"
    gpu = pd.read_parquet(telemetry) if telemetry.is_file() else pd.DataFrame(columns=["source"])
    return {"path": record, "run": run, "steps": steps, "gpu": gpu[gpu["source"] == "gpu"]}


def _column(steps: pd.DataFrame, name: str) -> np.ndarray:
    return steps[name].to_numpy(float) if name in steps else np.full(len(steps), np.nan)


def _spread(values: np.ndarray) -> dict[str, float]:
    values = values[np.isfinite(values)]
    if not values.size:
        return {"n": 0}
    return {
        "n": int(values.size),
        "median": float(np.median(values)),
        "min": float(values.min()),
        "max": float(values.max()),
    }


def check_sampling(rec: dict[str, Any]) -> tuple[bool, str]:
    telemetry, gpu, steps = rec["run"].get("telemetry") or {}, rec["gpu"], rec["steps"]
    rate = float(telemetry.get("rate_hz") or 0)
    if not telemetry.get("nvml") or gpu.empty or rate <= 0:
        return False, f"no NVML rows (nvml={telemetry.get('nvml')}, rate {rate} Hz, notes {telemetry.get('notes')})"
    first = gpu[gpu["device"] == gpu["device"].min()]
    interval = float(np.median(np.diff(np.sort(first["time_unix_s"].to_numpy(float)))))
    missed = telemetry.get("missed_ticks", 0) / max(telemetry.get("ticks", 0), 1)
    power, util = _column(steps, "power_mean_w"), _column(steps, "gpu_util_mean_pct")
    ok = (
        abs(interval * rate - 1) <= RATE_TOLERANCE
        and missed <= MISSED_TICKS_MAX
        and len(steps) > 0
        and bool(np.all(power > 0))
        and bool(np.all(util > 0))
    )
    return ok, (
        f"{rate:g} Hz: median interval {interval * 1e3:.1f} ms (target {1e3 / rate:.0f}), missed "
        f"{missed:.1%}; per post-warm-up step power {_fmt(_spread(power), 'W')}, GPU util "
        f"{_fmt(_spread(util), '%')}"
    )


def check_energy(rec: dict[str, Any]) -> tuple[bool, str]:
    steps = rec["steps"]
    energy = _column(steps, "energy_j")
    with np.errstate(divide="ignore", invalid="ignore"):  # no power: an infinite ratio, which fails
        ratio = energy / (_column(steps, "power_mean_w") * _column(steps, "step_time_s"))
    spread = _spread(ratio)
    # Without the counter the runner integrates the power samples, and the comparison would be circular.
    counter = "energy_j" in rec["gpu"] and bool(rec["gpu"]["energy_j"].notna().any())
    ok = (
        counter
        and len(steps) > 0
        and bool(np.all(energy > 0))
        and spread["n"] > 0
        and abs(spread["median"] - 1) <= ENERGY_TOLERANCE
    )
    source = "NVML's energy counter" if counter else "no NVML energy counter readings (power integrated instead)"
    return ok, f"{source}: energy {_fmt(_spread(energy), 'J')}; energy / (mean power x step time) {_fmt(spread, '')}"


def check_mfu(rec: dict[str, Any]) -> tuple[bool, str]:
    mfu = _column(rec["steps"], "mfu")
    ok = mfu.size > 0 and bool(np.all(np.isfinite(mfu) & (mfu > 0) & (mfu < 1)))
    return ok, f"mfu (fraction of the datasheet dense peak) {_fmt(_spread(mfu), '')}"


def check_memory(rec: dict[str, Any]) -> tuple[bool, str]:
    peak = _column(rec["steps"], "peak_device_memory_gb")
    used = rec["gpu"]["mem_used_gb"].max() if "mem_used_gb" in rec["gpu"] else math.nan
    ok = peak.size > 0 and bool(np.all(peak > 0))
    return ok, f"torch peak allocated {_fmt(_spread(peak), 'GB')}; NVML memory in use, max {used:.2f} GB"


def check_sampler(on: list[dict[str, Any]], off: list[dict[str, Any]]) -> tuple[bool, str, dict[str, Any]]:
    from rlbench.harness.record.regression import compare_samples

    times = {
        arm: np.concatenate([_column(r["steps"], "step_time_s") for r in recs]) if recs else np.array([])
        for arm, recs in (("on", on), ("off", off))
    }
    still_sampled = [str(r["path"].name) for r in off if (r["run"].get("telemetry") or {}).get("rate_hz")]
    result = compare_samples(times["off"], times["on"], direction="lower", threshold=SAMPLER_THRESHOLD)
    figures = {
        "ratio": result.ratio,
        "ci95": [result.ci_low, result.ci_high],
        "p_value": result.p_value,
        "verdict": result.verdict,
        "n_on": result.n_cand,
        "n_off": result.n_base,
        "median_on_s": result.median_cand,
        "median_off_s": result.median_base,
        "runs_on": len(on),
        "runs_off": len(off),
    }
    ok = result.verdict in ("unchanged", "improved") and not still_sampled
    detail = (
        f"median step with / without sampler {result.ratio:.3f} (95% CI {result.ci_low:.3f}-"
        f"{result.ci_high:.3f}, n {result.n_cand} vs {result.n_base} steps from {len(on)} vs {len(off)} runs, "
        f"Mann-Whitney p {result.p_value:.3g}): {result.verdict} at {SAMPLER_THRESHOLD:.0%}"
    )
    if still_sampled:
        detail += f"; the 'without' runs {still_sampled} were sampled"
    return ok, detail, figures


def _fmt(spread: dict[str, float], unit: str) -> str:
    if not spread.get("n"):
        return "none"
    unit = f" {unit}" if unit else ""
    return f"median {spread['median']:.4g}{unit} (min {spread['min']:.4g}, max {spread['max']:.4g}, n {spread['n']})"


def run_summary(rec: dict[str, Any]) -> dict[str, Any]:
    run, steps = rec["run"], rec["steps"]
    return {
        "record": rec["path"].name,
        "status": run.get("status"),
        "workload": run.get("workload", {}).get("name"),
        "steps_recorded": run.get("steps_recorded"),
        "step_time_s": _spread(_column(steps, "step_time_s")),
        "tokens_per_s": _spread(_column(steps, "tokens_per_s")),
        "mfu": _spread(_column(steps, "mfu")),
        "energy_j": _spread(_column(steps, "energy_j")),
        "vs_model": run.get("vs_model"),
    }


def summarize(records_root: Path, probe: Path | None, commit: str | None = None) -> dict[str, Any]:
    """The summary of a check's records (and probe): versions, each check's verdict, each run's figures."""
    found = {role: [load(path) for path in paths] for role, paths in find_records(records_root).items()}
    main = {role: found[role][0] for role in MAIN_ROLES if found.get(role)}
    checks: list[dict[str, Any]] = []
    for name, judge in (
        ("nvml_sampling", check_sampling),
        ("step_energy", check_energy),
        ("mfu", check_mfu),
        ("peak_memory", check_memory),
    ):
        for role in MAIN_ROLES:
            if role not in main:
                checks.append({"check": name, "run": role, "passed": False, "detail": "no record of this run"})
                continue
            ok, detail = judge(main[role])
            checks.append({"check": name, "run": role, "passed": bool(ok), "detail": detail})
    ok, detail, figures = check_sampler(found.get("sampler-on", []), found.get("sampler-off", []))
    checks.append(
        {"check": "sampler_overhead", "run": "tiny", "passed": bool(ok), "detail": detail, "figures": figures}
    )
    for role in MAIN_ROLES:
        status = main[role]["run"].get("status") if role in main else None
        checks.append(
            {"check": "run_succeeded", "run": role, "passed": status == "succeeded", "detail": f"status {status}"}
        )
    first = next(iter(main.values()), None)
    env = first["run"].get("environment", {}) if first else {}
    probe_data = json.loads(probe.read_text()) if probe and probe.is_file() else None
    return {
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "commit": commit,
        "started_at": first["run"].get("started_at") if first else None,
        "gpu": (env.get("gpus") or [{}])[0].get("name") or (probe_data or {}).get("gpu_name"),
        "driver": env.get("driver") or (probe_data or {}).get("driver"),
        "versions": {
            "python": env.get("python"),
            "cuda": env.get("cuda"),
            **(env.get("packages") or {}),
            "rlbench": (first["run"].get("rlbench") if first else None),
        },
        "fixture": (probe_data or {}).get("fixture"),
        "probe": bool(probe_data),
        "checks": checks,
        "all_passed": all(c["passed"] for c in checks),
        "runs": {role: [run_summary(r) for r in recs] for role, recs in found.items()},
    }


# ---- publish: the docs entry and the measured constants ----


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")


def measured_constants(probe: dict[str, Any], entry: str) -> dict[str, Any]:
    """The probe's figures the performance model reads (rlbench.harness.perfmodel.gpu_measured)."""
    keys = (
        "gpu_name",
        "driver",
        "torch",
        "cuda",
        "probe_version",
        "bf16_flops_per_s",
        "mem_bytes_per_s",
        "op_latency_s",
        "matmul_rates",
        "matmul_rates_median",
        "memory_bytes",
    )
    data = {key: probe.get(key) for key in keys}
    data["kernel_launch_s"] = probe.get("kernel_launch", {}).get("end_to_end_s")
    data["decode_step_s"] = probe.get("decode_step_s")
    data["source"] = f"measured by python -m rlbench.harness.predict.gpu_probe: {probe.get('method')}; see {entry}"
    if probe.get("fixture"):
        data["fixture"] = probe["fixture"]
    return data


def _stage_rows(run: dict[str, Any], prediction: dict[str, Any] | None) -> list[str]:
    vs = run.get("vs_model") or {}
    rows = [
        f"| {stage} | {v.get('measured_s', math.nan):.3f} | {v.get('predicted_s', math.nan):.3f} | "
        f"{v.get('measured_over_predicted', math.nan):.2f} |"
        for stage, v in (vs.get("stages") or {}).items()
    ]
    step = vs.get("step")
    if step:
        rows.append(
            f"| step | {step['measured_s']:.3f} | {step['predicted_s']:.3f} | {step['measured_over_predicted']:.2f} |"
        )
    if not rows:
        rows.append(
            f"| (no vs_model in run.json: {'prediction.json present' if prediction else 'no prediction'}) | | | |"
        )
    return rows


def render_entry(summary: dict[str, Any], probe: dict[str, Any] | None, records: dict[str, list[Path]]) -> str:
    date = (summary.get("started_at") or summary["generated_at"])[:10]
    lines = [f"# GPU check {date}: {summary.get('gpu')} (driver {summary.get('driver')})", ""]
    if summary.get("fixture"):
        lines += [f"**FIXTURE, not a measurement**: {summary['fixture']}", ""]
    lines += [
        "What ran: `bash benchmarks/gpu_check.sh WHEELS OUT` (issue 22): `rlbench run --framework trl` on "
        "CUDA for `gsm8k-grpo-tiny` and `gsm8k-grpo-qwen05b-random` with NVML sampling at the default rate, "
        "`python -m rlbench.harness.predict.gpu_probe`, and the tiny workload alternately without and with the "
        "sampler. Figures over post-warm-up steps.",
        "",
        "Versions: "
        + ", ".join(f"{k} {v}" for k, v in summary["versions"].items() if v and k != "rlbench")
        + f"; rlbench {json.dumps(summary['versions'].get('rlbench'))}, tree commit {summary.get('commit')}",
        "",
        "## Checks",
        "",
        "| check | run | result | figures |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {c['check']} | {c['run']} | {'pass' if c['passed'] else 'FAIL'} | {c['detail']} |"
        for c in summary["checks"]
    ]
    lines += ["", "## Measured / predicted per stage (rlbench's own prediction in each record)", ""]
    for role in MAIN_ROLES:
        for path in records.get(role, [])[:1]:
            run = json.loads((path / "run.json").read_text())
            prediction = path / "prediction.json"
            pred = json.loads(prediction.read_text()) if prediction.is_file() else None
            hw = (pred or {}).get("hardware")
            lines += [
                f"### {role}: `{run.get('workload', {}).get('name')}`, record `{path.name}` "
                f"(predicted on hardware row {hw})",
                "",
                "| stage | measured s | predicted s | measured/predicted |",
                "|---|---|---|---|",
                *_stage_rows(run, pred),
                "",
            ]
    if probe:
        lines += probe_section(probe)
    return "\n".join(lines) + "\n"


def probe_section(probe: dict[str, Any]) -> list[str]:
    from rlbench.harness.perfmodel import find_hardware

    sheet = find_hardware(str(probe.get("gpu_name", "")))
    square, copy = probe.get("square_matmul", {}), probe.get("copy", {})

    def of_sheet(got: float, field: str, unit: str, scale: float) -> str:
        peak = getattr(sheet, field, None) if sheet else None
        return f" ({got / peak:.0%} of the datasheet's {peak / scale:g} {unit})" if peak else ""

    lines = [
        "## GPU probe",
        "",
        f"Method: {probe.get('method')}",
        "",
        f"- bf16 matmul {square.get('shape')}^3: best {probe['bf16_flops_per_s'] / 1e12:.1f} TFLOP/s, median "
        f"{square.get('median_flops_per_s', 0) / 1e12:.1f} (n {square.get('n')} batches)"
        + of_sheet(probe["bf16_flops_per_s"], "bf16_flops", "TFLOP/s dense", 1e12),
        f"- HBM copy (read + write): best {probe['mem_bytes_per_s'] / 1e12:.2f} TB/s, median "
        f"{copy.get('median_bytes_per_s', 0) / 1e12:.2f} (n {copy.get('n')} batches)"
        + of_sheet(probe["mem_bytes_per_s"], "hbm_bytes_per_s", "TB/s", 1e12),
        f"- kernel launch: host enqueue {probe['kernel_launch']['host_enqueue_s'] * 1e6:.2f} us, end to end "
        f"{probe['kernel_launch']['end_to_end_s'] * 1e6:.2f} us per kernel (n {probe['kernel_launch']['n']})",
        f"- layer unit (one-token eager forward, slope 2 -> 8 layers): {probe['op_latency_s'] * 1e6:.1f} us per layer",
        "",
        "bf16 nn.functional.linear, best TFLOP/s (rows x dim):",
        "",
    ]
    rates = probe.get("matmul_rates", [])
    dims = sorted({int(d) for _, d, _ in rates})
    table = {(int(m), int(d)): r for m, d, r in rates}
    lines += ["| rows \\ dim | " + " | ".join(map(str, dims)) + " |", "|---" * (len(dims) + 1) + "|"]
    for rows in sorted({int(m) for m, _, _ in rates}):
        lines.append(f"| {rows} | " + " | ".join(f"{table[(rows, d)] / 1e12:.1f}" for d in dims) + " |")
    decode = probe.get("decode_step_s") or {}
    lines += [
        "",
        f"HF generate decode step, random bf16 {decode.get('model')} "
        f"({decode.get('parameters', 0) / 1e6:.0f}M "
        f"parameters), prompt {decode.get('prompt_tokens')}: seconds per step",
        "",
        "| batch | median ms | min ms | max ms | n |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {int(b)} | {m * 1e3:.2f} | {lo * 1e3:.2f} | {hi * 1e3:.2f} | {int(n)} |"
        for b, m, lo, hi, n in decode.get("rows", [])
    ]
    return lines + [""]


def publish(folder: Path, docs: Path, measured: Path) -> tuple[Path, Path | None]:
    probe_path = folder / "gpu_probe.json"
    probe = json.loads(probe_path.read_text()) if probe_path.is_file() else None
    with tempfile.TemporaryDirectory() as tmp:
        archive = folder / "records.tar.gz"
        if not archive.is_file():
            raise SystemExit(f"error: {archive} is missing; pass the folder gpu_check.sh wrote")
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")
        root = Path(tmp) / "records"
        sent = folder / "summary.json"  # the commit the check ran on is known only to the machine that ran it
        commit = json.loads(sent.read_text()).get("commit") if sent.is_file() else None
        summary = summarize(root, probe_path if probe else None, commit)
        gpu = slug(summary.get("gpu") or "unknown-gpu")
        date = (summary.get("started_at") or summary["generated_at"])[:10]
        entry = docs / f"{date}-{gpu}.md"
        docs.mkdir(parents=True, exist_ok=True)
        entry.write_text(render_entry(summary, probe, find_records(root)))
    constants = None
    if probe:
        constants = measured / f"{slug(probe['gpu_name'])}--{slug(str(probe.get('driver')))}.json"
        measured.mkdir(parents=True, exist_ok=True)
        rel = entry.relative_to(ROOT) if entry.is_relative_to(ROOT) else entry
        constants.write_text(json.dumps(measured_constants(probe, str(rel)), indent=2) + "\n")
    return entry, constants


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("summarize", help="judge a records folder (on the GPU machine)")
    s.add_argument("records", type=Path)
    s.add_argument("--probe", type=Path)
    s.add_argument("--commit", help="the commit of the tree the check ran (it may travel without .git)")
    s.add_argument("--out", type=Path, required=True)
    p = sub.add_parser("publish", help="docs entry, measured constants and per-stage table from an output folder")
    p.add_argument("folder", type=Path)
    p.add_argument("--docs", type=Path, default=ROOT / "docs" / "measurements")
    p.add_argument("--measured", type=Path, default=ROOT / "harness" / "perfmodel" / "measured")
    args = parser.parse_args(argv)
    if args.command == "summarize":
        if not args.records.is_dir():
            print(f"error: {args.records} is not a folder of run records", file=sys.stderr)
            return 2
        summary = summarize(args.records, args.probe, args.commit)
        args.out.write_text(json.dumps(summary, indent=2, default=str) + "\n")
        for c in summary["checks"]:
            print(f"{'PASS' if c['passed'] else 'FAIL'} {c['check']} [{c['run']}]: {c['detail']}")
        return 0 if summary["all_passed"] else 1
    if not args.folder.is_dir():
        print(
            f"error: {args.folder} is not a folder; pass the output folder of benchmarks/gpu_check.sh", file=sys.stderr
        )
        return 2
    entry, constants = publish(args.folder, args.docs, args.measured)
    print(f"wrote {entry}" + (f" and {constants}" if constants else " (no gpu_probe.json: no constants)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
