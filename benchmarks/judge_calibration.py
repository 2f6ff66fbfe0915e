"""Judge a framework's calibrated floor on runs outside its calibration: measured/predicted step, before and after.

Each judged record is a finished run whose prediction.json was made with the floor cached by
`rlbench calibrate` (its "floor" key names it). "after" is that prediction's step time; "before"
the same prediction less every stage's floor_s (the model alone: on a synchronous layout the
floor only adds). The measured step is the median over the post-warm-up steps, with the
interquartile range and n beside it. A judged record that is one of the floor's own calibration
cells is refused: a floor is judged on runs it was not fitted on.

    python benchmarks/judge_calibration.py ~/.cache/rlbench/floor-verl.json results/<judged run> ...
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def judge(floor_file: Path, run_dir: Path) -> dict[str, Any]:
    """One judged run: measured step (median, IQR, n), predicted before and after the floor, and per stage."""
    from rlbench.harness.errors import RLBenchError
    from rlbench.harness.record.contention import other_cpu_cores
    from rlbench.harness.record.read import read_record

    cached = json.loads(floor_file.read_text())
    calibration = {Path(cell["record"]).resolve() for cell in cached.get("cells", [])}
    if run_dir.resolve() in calibration:
        raise RLBenchError(f"{run_dir} is one of {floor_file}'s calibration runs; judge the floor on another run")
    record = read_record(run_dir)
    prediction = json.loads((run_dir / "prediction.json").read_text())
    if prediction.get("floor", {}).get("fixed_s") != cached["floor"]["fixed_s"]:
        raise RLBenchError(f"{run_dir}'s prediction was not made with the floor in {floor_file}; run it again")
    steps = record["steps"]
    steady = steps[steps["step"] > record["workload"]["warmup_steps"]]["step_time_s"].dropna()
    after = float(prediction["step_time_s"])
    floor = sum(stage.get("floor_s", 0.0) for stage in prediction["stages"])
    measured = float(steady.median())
    stages = record.get("vs_model", {}).get("stages", {})
    return {
        "framework": record["framework"]["name"],
        "workload": record["workload"]["name"],
        "response_len": record["workload"]["max_response_length"],
        "n": len(steady),
        "measured_s": measured,
        "iqr_s": (float(steady.quantile(0.25)), float(steady.quantile(0.75))),
        "predicted_before_s": after - floor,
        "predicted_after_s": after,
        "ratio_before": measured / (after - floor),
        "ratio_after": measured / after,
        "stages": {name: s.get("measured_over_predicted") for name, s in stages.items()},
        # other processes' CPU beside the framework (cores): a 2-core host shared with other work moves step times
        "other_cores": other_cpu_cores(record)[0],
        "calibration_other_cores": [other_cpu_cores(read_record(Path(c["record"])))[0] for c in cached["cells"]],
    }


def table(rows: list[dict[str, Any]]) -> str:
    """The judged runs as a Markdown table."""
    lines = [
        "| framework | judged workload | L | n | measured step s (median, IQR) | predicted before s | ratio before "
        "| predicted after s | ratio after | other cores (judged; calibration) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        low, high = r["iqr_s"]
        lines.append(
            f"| {r['framework']} | {r['workload']} | {r['response_len']} | {r['n']} | {r['measured_s']:.3f} "
            f"({low:.3f}-{high:.3f}) | {r['predicted_before_s']:.3f} | {r['ratio_before']:.2f} "
            f"| {r['predicted_after_s']:.3f} | **{r['ratio_after']:.2f}** | {_cores(r['other_cores'])}; "
            f"{', '.join(map(_cores, r['calibration_other_cores']))} |"
        )
    return "\n".join(lines)


def _cores(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: judge_calibration.py FLOOR_JSON RUN_DIR [RUN_DIR ...]", file=sys.stderr)
        return 2
    rows = [judge(Path(argv[0]), Path(run)) for run in argv[1:]]
    print(table(rows))
    for r in rows:
        print(r["framework"], json.dumps({k: round(v, 2) for k, v in r["stages"].items() if v is not None}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
