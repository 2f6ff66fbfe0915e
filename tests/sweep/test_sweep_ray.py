"""`rlbench sweep --executor ray` against a real Ray cluster started on loopback by this module.

The cluster is tests/loopback/ray_cluster.py's (ray[default]: the job API is served by
the dashboard), every component on 127.0.0.1 and free ports; the sweep submits real
`rlbench run` jobs of the TRL tiny workload through JobSubmissionClient. One job is
stopped mid-run with `stop_job`: the sweep must record it as failed (`stopped`),
bring its partial record back, and go on to the next run.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlbench.harness.record.read import read_record
from rlbench.harness.record.sweep_index import INDEX_FILE, load_index
from tests.conftest import PROJECT_ROOT
from tests.loopback.ray_cluster import CLIENT_ENV, loopback_ray

pytest.importorskip("trl")
job_submission = pytest.importorskip("ray.job_submission")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ray_head(model_cache):
    """The dashboard address of a 1-node loopback cluster; this process's job clients go without auth too."""
    with pytest.MonkeyPatch.context() as patch, loopback_ray(dashboard=True) as ray:
        for name, value in CLIENT_ENV.items():
            patch.setenv(name, value)
        yield ray.dashboard_url


# Enough steps that a stop sent after step 1 lands while the run is still going, even on a loaded machine
# (with 2, the run could end between the log poll and the stop, and the stop then met a finished run).
STEPS = 6


def _sweep(ray_head: str, out: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rlbench.harness",
            "sweep",
            "--framework",
            "trl",
            "--workload",
            "gsm8k-grpo-tiny",
            "--steps",
            str(STEPS),
            "--out",
            str(out),
            "--executor",
            "ray",
            "--ray-address",
            ray_head,
            *args,
        ],
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _training_job(client, sweep: subprocess.Popen) -> str:
    """The id of the sweep's job once its framework has logged a step."""
    end = time.monotonic() + 300
    while True:
        for job in client.list_jobs():
            logs = client.get_job_logs(job.submission_id) if job.status == job_submission.JobStatus.RUNNING else ""
            if f"step 1/{STEPS}" in logs:
                return job.submission_id
        assert time.monotonic() < end and sweep.poll() is None, "the job never started training"
        time.sleep(1)


def test_ray_sweep_survives_a_stopped_job(ray_head, tmp_path):
    client = job_submission.JobSubmissionClient(ray_head)
    out = tmp_path / "results"
    sweep = _sweep(ray_head, out, "--grid", "placement=colocated,disaggregated", "--repeats", "2")
    job_id = _training_job(client, sweep)
    client.stop_job(job_id)
    stdout, stderr = sweep.communicate(timeout=400)
    assert sweep.returncode == 1, stderr  # one run failed (stopped)

    (index_file,) = out.glob(f"*/{INDEX_FILE}")
    sweep_dir = index_file.parent
    index = load_index(sweep_dir)
    stopped, refused, succeeded, refused_again = index["cells"]
    assert refused["status"] == refused_again["status"] == "refused"
    assert stopped["status"] == "failed" and stopped["error"]["kind"] == "stopped"
    assert stopped["executor"] == {"kind": "ray", "address": ray_head, "job_id": job_id}
    # The wrapper turned the stop into the runner's Ctrl-C and sent the partial record back.
    assert read_record(sweep_dir / stopped["record"])["status"] == "interrupted"
    assert stopped["error"]["log_tail"]
    assert succeeded["status"] == "succeeded" and succeeded["executor"]["kind"] == "ray"
    record = read_record(sweep_dir / succeeded["record"])
    assert record["status"] == "succeeded" and record["steps"]["step"].tolist() == list(range(1, STEPS + 1))
    files = {p.name for p in (sweep_dir / succeeded["record"]).iterdir()}
    assert {"framework.log", "steps.parquet", "run.json"} <= files
    assert client.get_job_status(succeeded["executor"]["job_id"]) == job_submission.JobStatus.SUCCEEDED
    assert "failed: c000" in stdout and "stopped" in stdout and f"step {STEPS}/{STEPS}" in stderr


def test_ctrl_c_stops_the_ray_job_and_keeps_its_record(ray_head, tmp_path):
    client = job_submission.JobSubmissionClient(ray_head)
    out = tmp_path / "results"
    sweep = _sweep(ray_head, out)
    job_id = _training_job(client, sweep)
    sweep.send_signal(signal.SIGINT)
    _, stderr = sweep.communicate(timeout=200)
    assert sweep.returncode == 130 and "rlbench sweep --resume" in stderr, stderr
    assert client.get_job_status(job_id) == job_submission.JobStatus.STOPPED  # nothing left running on the cluster
    (index_file,) = out.glob(f"*/{INDEX_FILE}")
    (cell,) = load_index(index_file.parent)["cells"]
    assert cell["status"] == "interrupted" and cell["error"]["kind"] == "interrupted"
    assert read_record(index_file.parent / cell["record"])["status"] == "interrupted"
