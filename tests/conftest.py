"""Shared test fixtures: an isolated model cache and a helper to run the CLI as a user would."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def pytest_collection_modifyitems(config, items):
    """Skip @pytest.mark.gpu tests on machines without an NVIDIA GPU."""
    from rlbench.harness.spec.environment import gpus

    if gpus()[0]:
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def readme_section(start: str, end: str) -> str:
    """The README's text from `start` up to `end` (a GPU recipe, for the pin tests)."""
    readme = (PROJECT_ROOT / "README.md").read_text()
    begin = readme.index(start)
    return readme[begin : readme.index(end, begin)]


def readme_pins(start: str, end: str) -> dict[str, str]:
    """{distribution: version} of every `name==version` (extras allowed) in that README section."""
    return dict(re.findall(r"`?'?([a-z][a-z0-9_-]*)(?:\[[a-z,-]+\])?==([0-9][0-9.]*)", readme_section(start, end)))


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory) -> Path:
    """One tiny-model cache for the whole session, never the user's ~/.cache."""
    path = tmp_path_factory.mktemp("rlbench-cache")
    os.environ["RLBENCH_CACHE"] = str(path)
    return path


# This machine's CPU probe (harness/predict/cpu_probe.py), measured once and shared: each fresh RLBENCH_CACHE a test
# makes would otherwise measure the machine again, about 20 s at 2 torch threads and 30 s at 1. The folder is
# $RLBENCH_TEST_PROBES where set (.ci/run shares one across its nox sessions), else one per test session. A probe
# is cached only when measured on a quiet host, and one whose key (CPU, threads, torch, probe version) does not
# match is measured again by rlbench itself, so sharing changes no figure, only how often it is measured.
PROBE_FILES = "cpu_probe*.json"
_probe_store: list[Path] = []  # set by the session fixture below


@pytest.fixture(scope="session", autouse=True)
def shared_cpu_probes(tmp_path_factory) -> Path:
    shared = os.environ.get("RLBENCH_TEST_PROBES")
    store = Path(shared) if shared else tmp_path_factory.mktemp("cpu-probes")
    store.mkdir(parents=True, exist_ok=True)
    _probe_store[:] = [store]
    return store


def _copy_probes(source: Path, target: Path) -> None:
    """Every probe file of `source` that `target` lacks, each written whole (a temporary name, then renamed)."""
    if not source.is_dir() or (target.exists() and not target.is_dir()):
        return
    for probe in source.glob(PROBE_FILES):
        if (target / probe.name).exists():
            continue
        try:
            target.mkdir(parents=True, exist_ok=True)
            partial = target / f".{probe.name}.partial"
            shutil.copyfile(probe, partial)
            partial.replace(target / probe.name)
        except OSError:  # a read-only or odd cache folder: the run measures for itself, as a user's would
            return


def run_cli(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    """`python -m rlbench.harness ARGS` in a fresh process, as a user's shell would run it (its cache seeded
    with the session's CPU probe, and any probe it measured kept for the next)."""
    full_env = {**os.environ, **(env or {})}
    cache = Path(full_env["RLBENCH_CACHE"]) if full_env.get("RLBENCH_CACHE") and _probe_store else None
    if cache is not None:
        _copy_probes(_probe_store[0], cache)
    try:
        return subprocess.run(
            [sys.executable, "-m", "rlbench.harness", *args],
            capture_output=True,
            text=True,
            env=full_env,
            cwd=cwd or PROJECT_ROOT,
            timeout=timeout,
        )
    finally:
        if cache is not None:
            _copy_probes(cache, _probe_store[0])


GOLDEN_RECORDS = PROJECT_ROOT / "tests" / "data" / "records"


@pytest.fixture(scope="session")
def report_run(tmp_path_factory) -> Path:
    """A real 3-step TRL tiny run's record (2 steps after warm-up), checked in under tests/data/records/trl-tiny,
    shared by the report, history and nightly tests: they test the readers, so they need a real record, not a
    new run each time (tests/run/test_e2e_trl.py runs TRL itself). A copy, so a test may add to it."""
    out = tmp_path_factory.mktemp("report-results") / "20261204T171925Z-trl-gsm8k-grpo-tiny-f6d98a"
    shutil.copytree(GOLDEN_RECORDS / "trl-tiny", out, ignore=shutil.ignore_patterns("README.md"))
    return out


# The learnable tiny workload whose target every framework must reach (issue: learning parity).
LEARNABLE = "gsm8k-format-grpo-tiny"


def run_to_target(framework: str, out: Path, timeout_s: int, *extra: str) -> dict:
    """One real run of the learnable tiny workload until its quality target holds (rlbench stops it there);
    the record, after checking that the target was reached and ended the run."""
    from rlbench.harness.record.read import read_record

    result = run_cli(
        "run",
        "--framework",
        framework,
        "--workload",
        LEARNABLE,
        "--out",
        str(out),
        *extra,
        timeout=timeout_s + 300,
        env={"RLBENCH_RUN_TIMEOUT_S": str(timeout_s)},
    )
    logs = sorted(out.glob("*/framework.log"))
    tail = "\n".join(logs[-1].read_text(errors="replace").splitlines()[-40:]) if logs else ""
    assert result.returncode == 0, result.stderr + tail
    record = read_record(Path(result.stdout.strip().splitlines()[-1]))
    rewards = record["steps"]["reward_mean"].round(3).tolist()
    assert record["target"]["reached"], f"{framework} did not reach the target; rewards per step: {rewards}"
    assert record["target"]["stopped_at_target"] and record["steps_recorded"] < record["workload"]["steps"]
    return record


def check_from_record(out: Path) -> dict:
    """`rlbench predict --from-record` on the one record under `out` (a real run of the learnable task): its own
    layout predicted back within the run's measured spread, then scaled to 8 H100s with only the lengths carried
    over; the first prediction's JSON."""
    import json

    (run_json,) = out.glob("*/run.json")
    result = run_cli("predict", "--from-record", str(run_json.parent), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    check = data["consistency"]
    assert check["n"] >= 5 and check["within_spread"], check
    timed = [row for row in data["stages"] if row["basis"] == "measured ratio x model"]
    assert {"gen", "update_actor"} <= {row["stage"] for row in timed}, data["stages"]
    scaled = run_cli(
        "predict", "--from-record", str(run_json.parent), "--hardware", "H100-SXM", "--gpus", "8", "--json"
    )
    assert scaled.returncode == 0, scaled.stderr
    other = json.loads(scaled.stdout)
    assert other["consistency"] is None and all(row["basis"] == "model" for row in other["stages"])
    assert other["step_time_s"] < data["step_time_s"]  # a 3.4M-parameter model on 8 H100s against 2 CPU cores
    return data


# The shared 2-step runs also evaluate, through each framework's own validation hook, at their last step: 4
# held-out problems of the test split (an eval_accuracy target the random tiny model does not reach). A few
# seconds a run; each end-to-end file checks that eval_accuracy lands in its record.
EVAL_CHECK = "gsm8k-grpo-tiny-eval-check"


def eval_check_workload(folder: Path) -> Path:
    """gsm8k-grpo-tiny with an eval_accuracy target evaluated every 2 steps on 4 problems (a workload file)."""
    import yaml

    from rlbench.workloads.catalog import WORKLOAD_DIR

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{EVAL_CHECK}.yaml"
    target = {"metric": "eval_accuracy", "value": 1.0, "window": 1, "eval_every": 2, "eval_problems": 4}
    mapping = {"include": str(WORKLOAD_DIR / "gsm8k-grpo-tiny.yaml"), "name": EVAL_CHECK, "target": target}
    path.write_text(yaml.safe_dump(mapping))
    return path


def assert_eval_lands(record: dict, hook: str) -> None:
    """The run's one evaluation (step 2) is in its steps and its target block, through the framework's hook."""
    steps, target = record["steps"], record["target"]
    assert steps["eval_accuracy"].isna().tolist() == [True, False], steps["eval_accuracy"].tolist()
    accuracy = float(steps["eval_accuracy"].iloc[1])
    assert accuracy in (0.0, 0.25, 0.5, 0.75, 1.0)  # a mean of 4 problems' rewards, each 0 or 1
    assert [point["step"] for point in target["curve"]] == [2] and target["curve"][0]["eval_accuracy"] == accuracy
    assert target["curve"][0]["seconds"] > 0 and target["curve"][0]["tokens"] > 0
    evaluation = target["evaluation"]
    assert evaluation["problems"] == 4 and evaluation["split"] == "test" and hook in evaluation["hook"]
    assert not target["reached"] or accuracy == 1.0


def run_lane(
    framework: str,
    out: Path,
    timeout_s: int,
    *extra: str,
    env: dict[str, str] | None = None,
    evaluate: bool = True,
    workload: str = "gsm8k-grpo-tiny",
) -> Path:
    """One real 2-step `rlbench run` of a CPU lane's framework on the tiny GRPO workload, with one held-out
    evaluation unless `evaluate` is off (EVAL_CHECK; then `workload`, by default the tiny one; `extra` arguments
    and `env` added); its record folder.

    The runner's own timeout (RLBENCH_RUN_TIMEOUT_S) stops a hung framework a little before the test's does,
    so a hang still ends in a record; a failure shows the framework's log tail. Every socket the run's
    processes listen on (sampled while it runs) must be on loopback.
    """
    from tests.loopback.sockets import ListenerWatch, off_loopback

    with ListenerWatch(os.getpid(), interval_s=2) as watch:
        result = run_cli(
            "run",
            "--framework",
            framework,
            "--workload",
            str(eval_check_workload(out.with_name(out.name + "-workload"))) if evaluate else workload,
            "--steps",
            "2",
            "--out",
            str(out),
            *extra,
            timeout=timeout_s + 300,
            env={**(env or {}), "RLBENCH_RUN_TIMEOUT_S": str(timeout_s)},
        )
    logs = sorted(out.glob("*/framework.log"))
    tail = "\n".join(logs[-1].read_text(errors="replace").splitlines()[-40:]) if logs else ""
    assert result.returncode == 0, result.stderr + tail
    stray = off_loopback(watch.seen)
    assert watch.seen and not stray, "the run listened off loopback:\n" + "\n".join(map(str, stray))
    return Path(result.stdout.strip().splitlines()[-1])


def synthetic_record(folder: Path, step_times, version: int = 1, data: dict | None = None) -> Path:
    """A succeeded TRL record on the tiny workload: one 9 s warm-up step, then `step_times` (seconds); `data` is
    run.json's data identity (absent, as in a record written before it existed, when None)."""
    import dataclasses

    import numpy as np
    import pandas as pd

    from rlbench.harness.record.run_record import write_run_json
    from rlbench.harness.record.store import write_steps
    from rlbench.workloads.catalog import load_workload

    folder.mkdir(parents=True)
    times = np.concatenate([[9.0], np.asarray(step_times, float)])
    workload = dataclasses.asdict(load_workload("gsm8k-grpo-tiny").with_steps(times.size)) | {"version": version}
    record = {"status": "succeeded", "framework": {"name": "trl"}, "workload": workload, "parallel": {"dp": 1}}
    write_run_json(folder, record | ({"data": data} if data is not None else {}))
    write_steps(
        folder, pd.DataFrame({"step": range(1, times.size + 1), "step_time_s": times, "tokens_per_s": 1000 / times})
    )
    return folder


BROWSER = os.environ.get("RLBENCH_BROWSER", "/usr/bin/chromium")
BROWSER_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@contextlib.contextmanager
def report_page(report: Path) -> Iterator[tuple[Any, list[str]]]:
    """A report opened in the system Chromium (playwright): (page, problems), problems collecting console
    errors and warnings, page errors and failed requests. Skips where there is no Chromium, fails where
    RLBENCH_BROWSER names one that is missing (CI sets it)."""
    if not Path(BROWSER).is_file():
        if os.environ.get("RLBENCH_BROWSER"):
            pytest.fail(f"RLBENCH_BROWSER={BROWSER} is set but missing")
        pytest.skip("no Chromium here (apt-get install chromium; .ci/run installs it)")
    sync_api = pytest.importorskip("playwright.sync_api")
    problems: list[str] = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=BROWSER, args=BROWSER_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("console", lambda m: problems.append(f"{m.type}: {m.text}") if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))
        page.goto(report.as_uri())
        page.wait_for_load_state("load")
        try:
            yield page, problems
        finally:
            browser.close()
