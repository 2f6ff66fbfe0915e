"""`rlbench calibrate`: measure a framework's per-step floor on this machine with real runs, and cache it.

The work-depth model prices arithmetic, memory traffic and kernel depth; a framework's own code
around them it cannot know. Calibration measures it (perfmodel/floor.py): real runs of the
framework's own trainer on a tiny model (hidden 64, where the model predicts almost no time) at
two or more response lengths, each compared with that run's own prediction.json, stage column by
stage column: every column the framework logs, and "other", its step time outside them. What each
fitted term stands for, by framework (its stage columns: adapters/<name>/metrics.py):
* TRL (one process): gen = HF `generate`'s per-token bookkeeping; update_actor = the Trainer's
  optimizer step, logging and metric gathering; reward/old_log_prob where logged = their Python.
* verl (Ray, vLLM's HTTP server on the lane): gen = the v1 trainer waiting for its rollout batch,
  which its replay buffer polls every 2.0 s (so a short generation is measured as 2.0 s: the
  agent loop's HTTP round trips to the rollout server and the reward loop run inside);
  old_log_prob, update_actor = a Ray call to the FSDP worker with the batch moved there and
  back; adv = the driver's advantage code; weight_sync = the
  update_weights path (gather, serialise, load into the engine); other = the driver's batching
  and metrics between stages.
* OpenRLHF (Ray, vLLM engine actors): gen = generation and rewards through the engine actors;
  old_log_prob = make_experience's Ray calls (old, reference, advantage in one timed stage);
  update_actor = ppo_train's Ray call; weight_sync = broadcast_to_vllm; other = what step_total
  holds beyond them.
The floor is cached (floor_cache.py); from then on the predictions of this framework's runs on
this machine, and `rlbench predict --framework`, include it, saying so. The calibration runs'
records are kept; a run judged against the floor is never one of them
(benchmarks/judge_calibration.py refuses one).

    rlbench calibrate --framework trl                      # h64 at response lengths 8 and 16
    rlbench calibrate --framework verl --steps 10          # on the verl CPU lane's venv
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from rlbench.harness.errors import RLBenchError
from rlbench.harness.perfmodel import MODEL_STAGE, UNSTAGED, FrameworkFloor, measure_floor
from rlbench.harness.predict.run_prediction import STAGE_MAP
from rlbench.workloads.catalog import WORKLOAD_DIR

BASE_WORKLOAD = "gsm8k-grpo-tiny"
WARMUP_STEPS = 3
HIDDEN = 64  # small enough that the arithmetic is a few ms: what remains is the framework's
# rlbench's measured stage columns the floor can cover -> the model stages that predict each ("other", the time
# outside them, is the step less these).
MEASURED = {column: STAGE_MAP[column] for column in MODEL_STAGE if column in STAGE_MAP}


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
    """Measured and predicted (without any floor) seconds per stage column of one finished calibration run, with
    each measured median's standard error: every column the framework logged, and "other", its step time outside
    them."""
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
    steps = record["steps"]
    steady = steps[steps["step"] > record["workload"]["warmup_steps"]] if steps is not None else None
    if steady is None or steady.empty:
        raise RLBenchError(f"calibration run {run_dir} has no step after its warm-up; give more --steps")
    logged = [c for c in MEASURED if f"time_{c}_s" in steady and steady[f"time_{c}_s"].notna().all()]
    if "gen" not in logged:
        raise RLBenchError(
            f"calibration run {run_dir} logged no time_gen_s; "
            f"{record['framework']['name']} cannot be calibrated by stage"
        )
    columns = {c: steady[f"time_{c}_s"] for c in logged}
    # The step's time outside every timed stage: the driver's own code between them (0 where the stages tile it).
    columns["other"] = steady["step_time_s"] - sum(columns.values())
    measured, predicted, error = {}, {}, {}
    for column, values in columns.items():
        measured[column] = float(values.median())
        # the standard error of a median, sqrt(pi/2) x that of the mean; one step gives no spread (NaN)
        error[column] = float(1.2533 * values.std(ddof=1) / math.sqrt(len(values))) if len(values) > 1 else math.nan
        # The run's prediction already holds any earlier floor: calibrate against the model alone.
        names = MEASURED.get(column, (UNSTAGED,))
        predicted[column] = sum(stages[n]["time_s"] - stages[n].get("floor_s", 0.0) for n in names if n in stages)
    return {
        "record": str(run_dir),
        "response_len": record["workload"]["max_response_length"],
        "steps": len(steady),
        "measured_s": measured,
        "predicted_s": predicted,
        "measured_se_s": error,
    }


def calibrate(
    framework: str, lengths: list[int], *, steps: int, out: Path, echo: Callable[[str], None]
) -> tuple[FrameworkFloor, list[dict[str, Any]], Path]:
    """Run the calibration cells, measure the floor, cache it: (floor, cells, cache file)."""
    from rlbench.adapters.registry import get_adapter
    from rlbench.harness.run.runner import execute
    from rlbench.harness.spec.runspec import build_run_spec

    get_adapter(framework).check_machine()  # unknown, not installed or unusable here: before anything runs
    out.mkdir(parents=True, exist_ok=True)
    run_dirs = []
    for length in lengths:
        workload = tiny_workload(out, HIDDEN, length, steps)
        spec = build_run_spec(framework, str(workload), (), steps=None, seed=0, out=out / "records")
        echo(f"calibration run: {framework}, hidden {HIDDEN}, response length {length}, {steps} steps")
        run_dirs.append(execute(spec, echo=echo))
    return fit_floor(framework, run_dirs)


def fit_floor(framework: str, run_dirs: list[Path]) -> tuple[FrameworkFloor, list[dict[str, Any]], Path]:
    """The floor fitted on these finished calibration runs, cached for the framework: (floor, cells, cache file)."""
    from rlbench.harness.predict.floor_cache import save_floor

    cells = [calibration_cell(run_dir) for run_dir in run_dirs]
    lengths = sorted({c["response_len"] for c in cells})
    source = (
        f"rlbench calibrate: {framework} runs of {BASE_WORKLOAD} at hidden {HIDDEN}, "
        f"response lengths {', '.join(map(str, lengths))}"
    )
    floor = measure_floor(
        [(c["response_len"], c["measured_s"], c["predicted_s"], c["measured_se_s"]) for c in cells], source=source
    )
    return floor, cells, save_floor(framework, floor, cells)


def describe(floor: FrameworkFloor, cells: list[dict[str, Any]]) -> str:
    """The calibration cells (measured/predicted seconds per column) and the floor, as the command prints them."""
    columns = [c for c in MODEL_STAGE if all(c in cell["measured_s"] for cell in cells)]
    lines = [f"{'L':>4} | " + " | ".join(f"{c + ' meas/pred s':>22}" for c in columns)]
    for c in cells:
        m, p = c["measured_s"], c["predicted_s"]
        lines.append(f"{c['response_len']:>4} | " + " | ".join(f"{m[k]:>10.3f}/{p[k]:<11.3f}" for k in columns))
    lines.append("floor: " + ", ".join(describe_stage(floor, stage) for stage in columns if stage in floor.fixed_s))
    return "\n".join(lines)


def describe_stage(floor: FrameworkFloor, stage: str) -> str:
    """ "gen 14.7 ms + 2.00 ms/token" or "update_actor 179.1 ms"."""
    text = f"{stage} {floor.fixed_s.get(stage, 0.0) * 1e3:.1f} ms"
    if stage in floor.per_decode_step_s:
        text += f" + {floor.per_decode_step_s[stage] * 1e3:.2f} ms/token"
    return text
