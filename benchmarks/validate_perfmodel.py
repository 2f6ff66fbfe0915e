"""Validate the work-depth model against measured runs: step-time ratios across a grid of cells.

Reads the CSV `benchmarks/measure_tiny_grid.py` writes (columns hidden, response_length,
record), predicts every cell with the record's own model config.json, its measured mean
prompt length, its response length and layout, on the cached CPU row of `rlbench.harness.predict.cpu_probe`
(matmul peak, copy bandwidth, per-layer op latency), and compares measured with predicted
step, generation and update times, as absolute times and as ratios to a reference cell.
Nothing is fitted to the measurements: every constant comes from the probe (and, with --floor,
from calibration runs outside the grid).

    python benchmarks/validate_perfmodel.py /tmp/grid/grid.csv                # table
    python benchmarks/validate_perfmodel.py /tmp/grid/grid.csv --reference 256,32 --json
    python benchmarks/validate_perfmodel.py /tmp/grid/grid.csv --bound roofline   # without the depth term
    python benchmarks/validate_perfmodel.py /tmp/grid/grid.csv --floor /tmp/calib/grid.csv
    python benchmarks/validate_perfmodel.py /tmp/grid/grid.csv --floor ~/.cache/rlbench/floor-trl.json

--floor adds the framework's measured per-step floor (perfmodel/floor.py) to each stage: it is
measured from calibration runs of the same framework (another grid.csv, e.g. hidden 64 at
response lengths 8 and 16, outside the validated grid) as what the model leaves unexplained there,
or read from the file `rlbench calibrate --framework trl` caches.

--bound picks which time of each stage is compared: "predicted" (the model's choice; on a CPU
the Brent upper bound W/p + D*t), "lower" (max(W/p, D*t)), "upper", or "roofline" (the CPU row
without its op latency: W/p alone).

Ratio error of a cell = (predicted / predicted_ref) / (measured / measured_ref) - 1.
A cell measured several times (measure_tiny_grid.py --repeats) is the median of its runs'
medians; the column "rep" is the spread of their step times (max / min - 1).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import statistics
from pathlib import Path
from typing import Any

from rlbench.harness.perfmodel import (
    FrameworkFloor,
    Hardware,
    ParallelShape,
    WorkloadShape,
    load_hf_config,
    measure_floor,
    predict,
)
from rlbench.harness.predict.cpu_probe import cpu_peaks, cpu_row
from rlbench.harness.predict.run_prediction import STAGE_MAP
from rlbench.harness.record.read import read_record

METRICS = {"step": "step_time_s", "gen": "time_gen_s", "update_actor": "time_update_actor_s"}
MODEL_STAGES = {metric: STAGE_MAP[metric] for metric in ("gen", "update_actor")}  # the model stages of each
BOUNDS = {"predicted": "time_s", "lower": "brent_lower_s", "upper": "brent_upper_s", "roofline": "time_s"}


def _median(summary: dict[str, Any], key: str) -> float:
    value = summary.get(key, {}).get("median")
    return math.nan if value is None else float(value)


def _trl_launch(folder: Path) -> dict[str, Any]:
    path = folder / "trl_launch.json"
    return json.loads(path.read_text()).get("grpo_config", {}) if path.is_file() else {}


def shape_of(record: dict[str, Any], folder: Path) -> WorkloadShape:
    """The model's inputs from what the run recorded (mean prompt length measured, not the maximum)."""
    workload, summary = record["workload"], record["summary"]
    responses = _median(summary, "num_responses")
    prompt_len = _median(summary, "prompt_tokens") / responses
    padded = _median(summary, "padded_prompt_tokens") / responses  # NaN in records made before it was measured
    sequences = workload["prompts_per_step"] * workload["algorithm"]["group_size"]
    trl = _trl_launch(folder)
    # TRL without vLLM generates with Hugging Face generate over G repeated rows: no shared
    # prefill, and a KV cache grown by concatenation.
    shared = bool(trl.get("use_vllm", True)) if trl else True
    return WorkloadShape(
        prompts_per_step=workload["prompts_per_step"],
        group_size=workload["algorithm"]["group_size"],
        prompt_len=max(1, round(prompt_len)),
        response_len=workload["max_response_length"],
        use_kl_reference=workload["algorithm"]["kl_coef"] > 0,
        recompute_old_logprob=not math.isnan(_median(summary, "time_old_log_prob_s")),
        mini_batch_prompts=workload.get("mini_batch_prompts"),
        micro_batch_size=int(trl.get("per_device_train_batch_size", sequences)),
        gradient_checkpointing=bool(workload.get("gradient_checkpointing", False)),
        fixed_length=bool(workload.get("fixed_length", True)),
        shared_prefill=shared,
        kv_cache="paged" if shared else "concat",
        padded_prompt_len=None if math.isnan(padded) else max(round(prompt_len), round(padded)),
        dtype_bytes=4 if trl.get("model_init_kwargs", {}).get("dtype") == "float32" else 2,
    )


def cell(
    row: dict[str, str], hw: Hardware, bound: str = "predicted", floor: FrameworkFloor | None = None
) -> dict[str, Any]:
    folder = Path(row["record"])
    record = read_record(folder)
    arch = load_hf_config(Path(record["model_path"]) / "config.json")
    shape = shape_of(record, folder)
    p = predict(arch, shape, ParallelShape(gpus=1), hw, floor=floor)
    attr = BOUNDS[bound]
    predicted = {"step": sum(getattr(s, attr) for s in p.stages)}  # one device: the stages add
    for metric, stages in MODEL_STAGES.items():
        predicted[metric] = sum(getattr(p.stage(name), attr) for name in stages)
    return {
        "hidden": int(row["hidden"]),
        "response_length": int(row["response_length"]),
        "prompt_len": shape.prompt_len,
        "params": arch.param_count().total,
        "measured": {m: _median(record["summary"], key) for m, key in METRICS.items()},
        "predicted": predicted,
        "span_s": sum(s.depth_time_s or 0.0 for s in p.stages),
    }


def merge_repeats(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One cell from its repeated runs (measure_tiny_grid.py --repeats): the median of their
    measured medians, and the spread of their step times (max / min - 1) beside it."""
    merged = dict(runs[0])
    merged["measured"] = {m: statistics.median(r["measured"][m] for r in runs) for m in METRICS}
    steps = [r["measured"]["step"] for r in runs]
    merged["repeats"], merged["repeat_spread"] = len(runs), max(steps) / min(steps) - 1
    return merged


def read_cells(path: Path, hw: Hardware, bound: str, floor: FrameworkFloor | None = None) -> list[dict[str, Any]]:
    """Every cell of a grid.csv, measured and predicted; a cell's repeated rows merged."""
    with path.open() as handle:
        runs = [cell(row, hw, bound, floor) for row in csv.DictReader(handle)]
    by_cell: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for run in runs:
        by_cell.setdefault((run["hidden"], run["response_length"]), []).append(run)
    return [merge_repeats(group) for group in by_cell.values()]


def read_floor(path: Path, hw: Hardware, bound: str) -> FrameworkFloor:
    """The framework floor from `rlbench calibrate`'s cache file, or from a calibration grid.csv."""
    if path.suffix == ".json":
        return FrameworkFloor.from_dict(json.loads(path.read_text())["floor"])
    cells = read_cells(path, hw, bound)
    stages = list(MODEL_STAGES)
    return measure_floor(
        [
            (c["response_length"], {m: c["measured"][m] for m in stages}, {m: c["predicted"][m] for m in stages})
            for c in cells
        ],
        source="calibration runs " + ", ".join(f"h{c['hidden']}/L{c['response_length']}" for c in cells),
    )


def compare(cells: list[dict[str, Any]], reference: tuple[int, int]) -> dict[str, Any]:
    ref = next((c for c in cells if (c["hidden"], c["response_length"]) == reference), None)
    if ref is None:
        raise SystemExit(f"reference cell hidden={reference[0]} response_length={reference[1]} is not in the grid")
    worst: dict[str, float] = {}
    for c in cells:
        c["ratio"], c["ratio_error"] = {}, {}
        for m in METRICS:
            measured = c["measured"][m] / ref["measured"][m]
            predicted = c["predicted"][m] / ref["predicted"][m]
            c["ratio"][m] = {"measured": measured, "predicted": predicted}
            c["ratio_error"][m] = predicted / measured - 1
            worst[m] = max(worst.get(m, 0.0), abs(c["ratio_error"][m]))
    return {
        "reference": {"hidden": reference[0], "response_length": reference[1]},
        "cells": cells,
        "max_abs_ratio_error": worst,
    }


def table(result: dict[str, Any], peaks: dict[str, Any]) -> str:
    ref = result["reference"]
    lines = [
        f"CPU row: {peaks['fp32_flops_per_s'] / 1e9:.1f} GFLOP/s, {peaks['mem_bytes_per_s'] / 1e9:.1f} GB/s, "
        f"op latency {peaks['op_latency_s'] * 1e3:.3f} ms ({peaks['cpu_model']}, {peaks['threads']} threads)",
        f"stage times: {result['bound']}; ratios vs h{ref['hidden']}/L{ref['response_length']}; "
        "err = predicted ratio / measured ratio - 1",
        "",
        f"{'h':>4} {'L':>3} | {'step meas':>9} {'rep':>4} {'pred':>6} {'span':>5} | "
        f"{'step ratio m/p':>14} {'err':>5} | "
        f"{'gen m/p s':>11} {'ratio m/p':>10} {'err':>5} | {'upd m/p s':>11} {'ratio m/p':>10} {'err':>5}",
    ]
    for c in result["cells"]:
        m, p, r, e = c["measured"], c["predicted"], c["ratio"], c["ratio_error"]
        lines.append(
            f"{c['hidden']:>4} {c['response_length']:>3} | {m['step']:>9.3f} {c['repeat_spread']:>4.0%} "
            f"{p['step']:>6.3f} {c['span_s']:>5.2f} | "
            f"{r['step']['measured']:>6.2f}/{r['step']['predicted']:<7.2f} {e['step']:>+5.0%} | "
            f"{m['gen']:>5.2f}/{p['gen']:<5.2f} {r['gen']['measured']:>4.2f}/{r['gen']['predicted']:<5.2f} "
            f"{e['gen']:>+5.0%} | {m['update_actor']:>5.2f}/{p['update_actor']:<5.2f} "
            f"{r['update_actor']['measured']:>4.2f}/{r['update_actor']['predicted']:<5.2f} {e['update_actor']:>+5.0%}"
        )
    worst = result["max_abs_ratio_error"]
    lines += ["", "max |ratio error|: " + ", ".join(f"{m} {worst[m]:.0%}" for m in METRICS)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("grid", type=Path, help="grid.csv with columns hidden, response_length, record")
    parser.add_argument("--reference", default="256,32", help="HIDDEN,LENGTH of the reference cell")
    parser.add_argument("--bound", choices=list(BOUNDS), default="predicted", help="which stage time to compare")
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    parser.add_argument(
        "--floor", type=Path, help="calibration grid.csv or rlbench calibrate's floor-<framework>.json: add that floor"
    )
    args = parser.parse_args()
    hidden, length = (int(x) for x in args.reference.split(","))
    peaks = cpu_peaks()
    hw = cpu_row(peaks)
    if args.bound == "roofline":
        hw = dataclasses.replace(hw, op_latency_s=None)
    floor = read_floor(args.floor, hw, args.bound) if args.floor else None
    cells = read_cells(args.grid, hw, args.bound, floor)
    result = compare(cells, (hidden, length)) | {
        "bound": args.bound,
        "floor": None if floor is None else floor.to_dict(),
    }
    if args.json:
        print(
            json.dumps(
                {
                    "hardware": {
                        k: peaks[k]
                        for k in (
                            "fp32_flops_per_s",
                            "mem_bytes_per_s",
                            "op_latency_s",
                            "cpu_model",
                            "threads",
                            "method",
                        )
                    },
                    **result,
                },
                indent=2,
            )
        )
    else:
        print(table(result, peaks))
        if floor is not None:
            print(
                "framework floor ("
                + floor.source
                + "): "
                + ", ".join(
                    f"{m} {floor.fixed_s.get(m, 0) * 1e3:.1f} ms + "
                    f"{floor.per_decode_step_s.get(m, 0) * 1e3:.2f} ms/token"
                    for m in MODEL_STAGES
                )
            )


if __name__ == "__main__":
    main()
