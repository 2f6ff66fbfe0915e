"""`rlbench calibrate`: measure a framework's per-step floor on this machine with real runs, and cache it.

The work-depth model prices arithmetic, memory traffic and kernel depth; a framework's own
Python around them (generate's per-token bookkeeping, the Trainer's optimizer step and logging)
it cannot know. Calibration measures it (perfmodel/floor.py): real runs of the framework's own
trainer on a tiny model (hidden 64, where the model predicts almost no time) at two or more
response lengths, each compared with that run's own prediction.json. The floor is cached
(floor_cache.py); from then on the predictions of this framework's runs on this machine, and
`rlbench predict --framework`, include it, saying so. The calibration runs' records are kept.

    rlbench calibrate --framework trl                      # h64 at response lengths 8 and 16
    rlbench calibrate --framework trl --lengths 8,16,32 --steps 12
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from rlbench.harness.errors import RLBenchError
from rlbench.harness.perfmodel import FrameworkFloor, measure_floor
from rlbench.harness.perfmodel.floor import MODEL_STAGE
from rlbench.harness.predict.run_prediction import STAGE_MAP
from rlbench.workloads.catalog import WORKLOAD_DIR

BASE_WORKLOAD = "gsm8k-grpo-tiny"
WARMUP_STEPS = 3
HIDDEN = 64  # small enough that the arithmetic is a few ms: what remains is the framework's
# rlbench's measured stage columns the floor covers -> the model stages that predict each.
MEASURED = {column: STAGE_MAP[column] for column in MODEL_STAGE}


def tiny_workload(folder: Path, hidden: int, length: int, steps: int) -> Path:
    """A YAML file: the tiny GSM8K GRPO workload at this hidden size and response length."""
    name = f"tiny-h{hidden}-r{length}"
    mapping = {
        "include": [str(WORKLOAD_DIR / f"{BASE_WORKLOAD}.yaml")],
        "name": name,
        "max_response_length": length,
        "steps": steps,
        # On a CPU the update speeds up over the first ~3 steps (the allocator settles: measured
        # 1.41, 0.62, 0.45, then 0.34-0.51 s at h256), so those steps stay out of the medians.
        "warmup_steps": min(WARMUP_STEPS, steps - 1),
        # head_dim stays 64, as the tiny workloads fix it; the FFN keeps Qwen's ~2.7x ratio.
        "model": {
            "tiny": {
                "hidden_size": hidden,
                "num_heads": max(hidden // 64, 1),
                "num_kv_heads": max(hidden // 128, 1),
                "intermediate_size": int(hidden * 2.6875),
            }
        },
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(mapping))
    return path


def parse_lengths(text: str) -> list[int]:
    """ "8,16" -> [8, 16]; two distinct positive lengths at least."""
    try:
        lengths = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        lengths = []
    if len(lengths) < 2 or lengths[0] < 1:
        raise RLBenchError(f"--lengths {text!r}: give two different positive response lengths at least, e.g. 8,16")
    return lengths


def calibration_cell(run_dir: Path) -> dict[str, Any]:
    """Measured and predicted (without any floor) seconds per stage of one finished calibration run."""
    import json

    from rlbench.harness.record.read import read_record

    record = read_record(run_dir)
    prediction = json.loads((run_dir / "prediction.json").read_text())
    if not prediction.get("available"):
        raise RLBenchError(
            f"calibration run {run_dir} has no prediction ({prediction.get('reason')}); "
            "a floor needs the model's prediction of the same run"
        )
    stages = {s["name"]: s for s in prediction["stages"]}
    measured, predicted = {}, {}
    for column, names in MEASURED.items():
        value = record["summary"].get(f"time_{column}_s", {}).get("median")
        if value is None:
            raise RLBenchError(
                f"calibration run {run_dir} logged no time_{column}_s; "
                f"{record['framework']['name']} cannot be calibrated by stage"
            )
        measured[column] = float(value)
        # The run's prediction already holds any earlier floor: calibrate against the model alone.
        predicted[column] = sum(stages[n]["time_s"] - stages[n].get("floor_s", 0.0) for n in names)
    return {
        "record": str(run_dir),
        "response_len": record["workload"]["max_response_length"],
        "measured_s": measured,
        "predicted_s": predicted,
    }


def calibrate(
    framework: str, lengths: list[int], *, steps: int, out: Path, echo: Callable[[str], None]
) -> tuple[FrameworkFloor, list[dict[str, Any]], Path]:
    """Run the calibration cells, measure the floor, cache it: (floor, cells, cache file)."""
    from rlbench.adapters.registry import get_adapter
    from rlbench.harness.predict.floor_cache import save_floor
    from rlbench.harness.run.runner import execute
    from rlbench.harness.spec.runspec import build_run_spec

    get_adapter(framework).check_machine()  # unknown, not installed or unusable here: before anything runs
    out.mkdir(parents=True, exist_ok=True)
    cells = []
    for length in lengths:
        workload = tiny_workload(out, HIDDEN, length, steps)
        spec = build_run_spec(framework, str(workload), (), steps=None, seed=0, out=out / "records")
        echo(f"calibration run: {framework}, hidden {HIDDEN}, response length {length}, {steps} steps")
        cells.append(calibration_cell(execute(spec, echo=echo)))
    source = (
        f"rlbench calibrate: {framework} runs of {BASE_WORKLOAD} at hidden {HIDDEN}, "
        f"response lengths {', '.join(map(str, lengths))}"
    )
    floor = measure_floor([(c["response_len"], c["measured_s"], c["predicted_s"]) for c in cells], source=source)
    return floor, cells, save_floor(framework, floor, cells)


def describe(floor: FrameworkFloor, cells: list[dict[str, Any]]) -> str:
    """The calibration cells and the floor, as the command prints them."""
    lines = [f"{'L':>4} | {'gen meas/pred s':>16} | {'update meas/pred s':>19}"]
    for c in cells:
        m, p = c["measured_s"], c["predicted_s"]
        lines.append(
            f"{c['response_len']:>4} | {m['gen']:>7.3f}/{p['gen']:<8.3f} | "
            f"{m['update_actor']:>8.3f}/{p['update_actor']:<9.3f}"
        )
    lines.append("floor: " + ", ".join(describe_stage(floor, stage) for stage in MEASURED))
    return "\n".join(lines)


def describe_stage(floor: FrameworkFloor, stage: str) -> str:
    """ "gen 14.7 ms + 2.00 ms/token" or "update_actor 179.1 ms"."""
    text = f"{stage} {floor.fixed_s.get(stage, 0.0) * 1e3:.1f} ms"
    if stage in floor.per_decode_step_s:
        text += f" + {floor.per_decode_step_s[stage] * 1e3:.2f} ms/token"
    return text
