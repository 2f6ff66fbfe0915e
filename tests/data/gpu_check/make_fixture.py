"""Build the FIXTURE output folder of benchmarks/gpu_check.sh in this folder (synthetic, not a measurement).

Its shape is the real one: gpu_check.log, environment.txt, gpu_probe.json, records.tar.gz
(records/<role>/<record>/ with run.json, steps.parquet, telemetry.parquet, prediction.json) and
summary.json. Each record starts from the real CPU record in tests/data/record-trl-tiny; the GPU
fields (NVML telemetry at 10 Hz, per-step energy, power, utilisation, MFU, device memory, the
environment's GPU and driver) are made-up numbers from a fixed seed, and every file says FIXTURE.

    .nox/tests/bin/python tests/data/gpu_check/make_fixture.py
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parent / "record-trl-tiny"
LABEL = "FIXTURE: synthetic numbers shaped like a GPU check's output (tests/data/gpu_check/make_fixture.py)"
GPU, DRIVER = "NVIDIA H200", "580.159.04"
T0 = 1796400000.0


def telemetry(start: float, end: float, power: float, rng: np.random.Generator, rate_hz: float = 10.0) -> pd.DataFrame:
    from rlbench.harness.telemetry.columns import arrow_schema

    times = np.arange(start, end, 1 / rate_hz)
    n = times.size
    gpu = pd.DataFrame({"time_unix_s": times, "host": "fixture", "source": "gpu", "device": 0,
                        "gpu_util_pct": rng.uniform(40, 95, n), "mem_util_pct": rng.uniform(10, 60, n),
                        "mem_used_gb": rng.uniform(5, 9, n), "power_w": power + rng.normal(0, 3, n),
                        "energy_j": 1e6 + np.cumsum(np.full(n, power / rate_hz)),
                        "sm_clock_mhz": 1980.0, "mem_clock_mhz": 3201.0, "temperature_c": 45.0,
                        "throttle_reasons": 0})
    host = pd.DataFrame({"time_unix_s": times, "host": "fixture", "source": "host", "device": -1,
                         "cpu_util_pct": 20.0, "proc_cpu_util_pct": 100.0, "proc_rss_gb": 3.0, "proc_count": 2,
                         "host_mem_used_gb": 20.0})
    table = pd.concat([gpu, host], ignore_index=True).sort_values("time_unix_s")
    schema = arrow_schema()
    return table.reindex(columns=schema.names)


def record(folder: Path, workload: str, steps: int, warmup: int, step_s: float, power: float, start: float,
           rng: np.random.Generator, sampled: bool = True) -> float:
    """One synthetic GPU record; returns its end time."""
    run = json.loads((SOURCE / "run.json").read_text())
    prediction = json.loads((SOURCE / "prediction.json").read_text())
    times = step_s * rng.uniform(0.95, 1.05, steps)
    times[0] *= 3  # the warm-up step compiles and autotunes
    ends = start + 5 + np.cumsum(times)
    starts = ends - times
    table = pd.DataFrame({"step": np.arange(1, steps + 1), "step_time_s": times, "step_start_unix_s": starts,
                          "step_end_unix_s": ends, "time_gen_s": 0.6 * times, "time_reward_s": 0.001,
                          "time_update_actor_s": 0.4 * times, "prompt_tokens": 1400.0, "response_tokens": 512.0,
                          "total_tokens": 1912.0, "num_responses": 16.0, "tokens_per_s": 1912.0 / times,
                          "peak_device_memory_gb": rng.uniform(2, 3, steps), "mfu": rng.uniform(0.01, 0.05, steps)})
    if sampled:
        table["power_mean_w"] = power + rng.normal(0, 2, steps)
        table["energy_j"] = table["power_mean_w"] * times * rng.uniform(0.97, 1.03, steps)
        table["gpu_util_mean_pct"] = rng.uniform(50, 90, steps)
    end = float(ends[-1] + 3)
    run.update({"status": "succeeded", "steps_recorded": steps, "started_at": "2026-12-05T10:00:00+00:00",
                "model_path": "/tmp/fixture", "fixture": LABEL})
    run["workload"] = run["workload"] | {"name": workload, "steps": steps, "warmup_steps": warmup}
    run["environment"] = run["environment"] | {"gpus": [{"index": 0, "name": GPU, "memory_gb": 150.1}], "gpu_count": 1,
                                               "driver": DRIVER, "cuda": "13.0", "python": "3.12.3"}
    run["environment"]["packages"] = run["environment"]["packages"] | {"torch": "2.11.0+cu130",
                                                                       "transformers": "5.17.0"}
    run["telemetry"] = ({"gpus": {"0": GPU}, "host": "fixture", "missed_ticks": 0, "notes": [], "nvml": True,
                         "rate_hz": 10.0, "ticks": int((end - start) * 10), "started_unix_s": start,
                         "stopped_unix_s": end} if sampled else {"disabled": "RLBENCH_SAMPLE_HZ=0"})
    post = times[warmup:]
    gen = float(np.median(0.6 * post))
    run["vs_model"] = {"stages": {"gen": {"measured_s": gen, "predicted_s": 0.05, "floor_s": 0.0,
                                          "measured_over_predicted": gen / 0.05},
                                  "update_actor": {"measured_s": float(np.median(0.4 * post)), "predicted_s": 0.1,
                                                   "floor_s": 0.0,
                                                   "measured_over_predicted": float(np.median(0.4 * post)) / 0.1}},
                       "step": {"measured_s": float(np.median(post)), "predicted_s": 0.15,
                                "measured_over_predicted": float(np.median(post)) / 0.15}, "bubble": 0.5}
    prediction = copy.deepcopy(prediction) | {"hardware": "H200", "fixture": LABEL}
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps(run, indent=2))
    (folder / "prediction.json").write_text(json.dumps(prediction, indent=2))
    table.to_parquet(folder / "steps.parquet", index=False)
    if sampled:
        telemetry(start, end, power, rng).to_parquet(folder / "telemetry.parquet", index=False)
    return end


def probe() -> dict:
    rows, dims = (16, 256, 4096), (896, 4096)
    return {"fixture": LABEL, "gpu_name": GPU, "driver": DRIVER, "memory_bytes": 150e9, "multiprocessors": 132,
            "torch": "2.11.0+cu130", "cuda": "13.0", "transformers": "5.17.0", "probe_version": 1,
            "bf16_flops_per_s": 7.0e14, "square_matmul": {"shape": 8192, "best_s": 1.57e-3, "median_s": 1.6e-3,
                                                         "max_s": 1.7e-3, "n": 7, "median_flops_per_s": 6.9e14},
            "mem_bytes_per_s": 4.0e12, "copy": {"best_s": 5.4e-4, "median_s": 5.5e-4, "n": 7,
                                                "median_bytes_per_s": 3.9e12},
            "matmul_rates": [[m, d, 1e11 * m ** 0.8 * d ** 0.2] for d in dims for m in rows],
            "matmul_rates_median": [[m, d, 0.9e11 * m ** 0.8 * d ** 0.2] for d in dims for m in rows],
            "kernel_launch": {"host_enqueue_s": 4e-6, "end_to_end_s": 5e-6, "n": 5000},
            "layer_unit": {"forward_2_layers_s": 1e-3, "forward_8_layers_s": 2.2e-3, "per_layer_s": 2e-4, "n": 200},
            "op_latency_s": 2e-4,
            "decode_step_s": {"model": "Qwen2.5-0.5B-Instruct", "parameters": 494032768, "weight_bytes": 988065536,
                              "prompt_tokens": 128, "columns": ["batch", "median_s", "min_s", "max_s", "n"],
                              "rows": [[1, 0.021, 0.020, 0.023, 3], [8, 0.022, 0.021, 0.024, 3]]},
            "method": f"{LABEL}; shaped like rlbench.harness.predict.gpu_probe's output"}


def main() -> None:
    rng = np.random.default_rng(22)
    for name in ("records.tar.gz", "gpu_probe.json", "summary.json", "gpu_check.log", "environment.txt"):
        (HERE / name).unlink(missing_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "records"
        t = record(root / "tiny" / "20261205T100000Z-trl-gsm8k-grpo-tiny-aaaa", "gsm8k-grpo-tiny", 6, 1, 0.8, 150,
                   T0, rng)
        t = record(root / "qwen05b" / "20261205T100100Z-trl-gsm8k-grpo-qwen05b-random-bbbb",
                   "gsm8k-grpo-qwen05b-random", 6, 2, 5.0, 320, t + 5, rng)
        for i in range(2):
            t = record(root / "sampler-off" / f"20261205T10020{i}Z-trl-gsm8k-grpo-tiny-off{i}", "gsm8k-grpo-tiny",
                       8, 1, 0.8, 150, t + 5, rng, sampled=False)
            t = record(root / "sampler-on" / f"20261205T10030{i}Z-trl-gsm8k-grpo-tiny-on{i}", "gsm8k-grpo-tiny",
                       8, 1, 0.8, 150, t + 5, rng)
        with tarfile.open(HERE / "records.tar.gz", "w:gz") as tar:
            tar.add(root, arcname="records")
        (HERE / "gpu_probe.json").write_text(json.dumps(probe(), indent=2) + "\n")
        summary = subprocess.run([sys.executable, str(HERE.parents[2] / "benchmarks" / "gpu_check_results.py"),
                                  "summarize", str(root), "--probe", str(HERE / "gpu_probe.json"),
                                  "--commit", "FIXTURE", "--out", str(HERE / "summary.json")],
                                 capture_output=True, text=True)
        log = f"{LABEL}\n== summary and packing\n{summary.stdout}"
    (HERE / "gpu_check.log").write_text(log)
    (HERE / "environment.txt").write_text(f"{LABEL}\n# nvidia-smi\n(fixture)\n# python\nPython 3.12.3\n")
    shutil.rmtree(HERE / "__pycache__", ignore_errors=True)
    print(log)


if __name__ == "__main__":
    main()
