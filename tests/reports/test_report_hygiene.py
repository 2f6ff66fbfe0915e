"""Measurement hygiene: a contended host, a wide spread, too few steps and a missing floor are each named.

The contention check is real: a TRL tiny run measured while two busy processes
load this machine's cores must come out flagged from its own record.
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from rlbench.reports.hygiene import hygiene, hygiene_rows
from rlbench.reports.load import RunView, load_runs
from tests.conftest import run_cli


def _view(summary: dict, cores: int = 2, prediction: dict | None = None, gpus: list | None = None) -> RunView:
    record = {
        "status": "succeeded",
        "framework": {"name": "trl"},
        "summary": summary,
        "environment": {"cpu_count": cores, "gpus": gpus or []},
    }
    return RunView(Path("r"), record, None, None, None, prediction, "r")


def _stat(median: float, std: float = 0.0, n: int = 8, mean: float | None = None) -> dict:
    return {"median": median, "mean": median if mean is None else mean, "std": std, "n": n}


def test_a_quiet_steady_well_sampled_run_has_no_warnings():
    view = _view(
        {"step_time_s": _stat(2.0, 0.04), "cpu_util_mean_pct": _stat(52.0), "proc_cpu_util_mean_pct": _stat(100.0)},
        prediction={"available": True, "floor": {"source": "calibration runs"}},
    )
    h = hygiene(view)
    assert h.warnings == [] and h.other_cpu_cores == pytest.approx(0.04) and h.floor == "calibrated"
    assert h.step_time_cv == pytest.approx(0.02)


def test_each_problem_is_named():
    view = _view(
        {"step_time_s": _stat(2.0, 1.0, n=3), "cpu_util_mean_pct": _stat(100.0), "proc_cpu_util_mean_pct": _stat(40.0)},
        prediction={"available": True, "floor": {"reason": "not calibrated"}},
    )
    text = " | ".join(hygiene(view).warnings)
    assert "host contended: other processes used 1.6 of 2 cores" in text
    assert "step time varies 50%" in text
    assert "3 post-warm-up step(s): compare needs 4 per side" in text
    assert "rlbench calibrate --framework trl" in text
    # A GPU run has no CPU floor to calibrate; a run without telemetry claims no contention.
    gpu = _view(
        {"step_time_s": _stat(2.0, 0.02)},
        gpus=[{"name": "H100"}],
        prediction={"available": True, "floor": {"reason": "GPU row"}},
    )
    assert hygiene(gpu).floor == "n/a" and hygiene(gpu).warnings == []
    headers, rows = hygiene_rows([view, gpu])
    assert len(rows) == 2 and rows[1][-1] == "none" and "framework floor" in headers


def _burn(seconds: float) -> None:
    import time

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


@pytest.mark.slow
def test_a_run_on_a_loaded_host_is_flagged_from_its_own_record(tmp_path, model_cache):
    pytest.importorskip("trl")
    # One busy process per core but one: a whole core taken from the run, which still gets the rest.
    burners = [
        multiprocessing.Process(target=_burn, args=(600,), daemon=True)
        for _ in range(max(1, multiprocessing.cpu_count() - 1))
    ]
    for burner in burners:
        burner.start()
    try:
        result = run_cli(
            "run",
            "--framework",
            "trl",
            "--workload",
            "gsm8k-grpo-tiny",
            "--steps",
            "2",
            "--out",
            str(tmp_path),
            timeout=900,
        )
    finally:
        for burner in burners:
            burner.kill()
    assert result.returncode == 0, result.stderr
    (run,) = load_runs([Path(result.stdout.strip().splitlines()[-1])])
    h = hygiene(run)
    assert h.other_cpu_cores is not None and h.other_cpu_cores >= 0.5, h
    assert any(w.startswith("host contended") for w in h.warnings)
