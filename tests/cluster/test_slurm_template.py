"""benchmarks/slurm/rlbench-ray.sbatch: it parses, and its dry run (stub scontrol, srun and hostname; no Ray, no
network) starts the Ray head on the first host, one worker per other host, and rlbench on the head against it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "slurm" / "rlbench-ray.sbatch"
BASH = shutil.which("bash")
HOSTS = ["gpu-a1", "gpu-a2", "gpu-a3"]
HEAD_IP = "10.1.2.3"
USER_ARGS = ["--framework", "verl", "--workload", "math-grpo", "--parallel", "dp=24"]

pytestmark = pytest.mark.skipif(BASH is None, reason="needs bash")

STUBS = {
    "scontrol": "#!/bin/sh\nprintf '%s\\n' " + " ".join(HOSTS) + "\n",
    # srun: drop srun's own options (-w takes a value), run the rest.
    "srun": "#!/bin/sh\nwhile [ $# -gt 0 ]; do\n"
    '  case "$1" in -w|--nodelist) shift 2;; -*) shift;; *) break;; esac\ndone\nexec "$@"\n',
    # An IPv6 and a bridge address around the head's: the script must take the first IPv4.
    "hostname": f"#!/bin/sh\necho 'fe80::1 {HEAD_IP} 172.17.0.1'\n",
    # The dry run must run neither of these.
    "ray": "#!/bin/sh\necho 'stub ray ran' >&2\nexit 97\n",
    "rlbench": "#!/bin/sh\necho 'stub rlbench ran' >&2\nexit 97\n",
}


def run_script(tmp_path: Path, *args: str, **env_overrides: str | None) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in STUBS.items():
        stub = bin_dir / name
        stub.write_text(text)
        stub.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "RAY_", "RLBENCH_"))}
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}",
        RLBENCH_SLURM_DRY_RUN="1",
        SLURM_JOB_NODELIST="gpu-a[1-3]",
        SLURM_JOB_NUM_NODES="3",
        SLURM_GPUS_PER_NODE="8",
    )
    for key, value in env_overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return subprocess.run([BASH, str(SCRIPT), *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=30)


def commands(result: subprocess.CompletedProcess[str]) -> list[list[str]]:
    assert result.returncode == 0, result.stderr
    assert "stub" not in result.stderr, result.stderr
    return [line[2:].split() for line in result.stdout.splitlines() if line.startswith("+ ")]


def ray_args(cmd: list[str]) -> list[str]:
    """What follows `ray` in a command (empty where it runs no `ray`)."""
    return cmd[cmd.index("ray") + 1 :] if "ray" in cmd else []


def test_script_parses():
    result = subprocess.run([BASH, "-n", str(SCRIPT)], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr


def test_dry_run_starts_head_workers_and_rlbench(tmp_path):
    cmds = commands(run_script(tmp_path, *USER_ARGS))
    address = f"{HEAD_IP}:6379"

    heads = [c for c in cmds if ray_args(c)[:2] == ["start", "--head"]]
    assert len(heads) == 1
    head = heads[0]
    assert head[0] == "srun" and head[head.index("-w") + 1] == HOSTS[0]
    assert f"--node-ip-address={HEAD_IP}" in head and "--port=6379" in head
    assert head[head.index("--num-gpus") + 1] == "8"

    workers = [c for c in cmds if ray_args(c)[:2] == ["start", "--address"]]
    assert sorted(w[w.index("-w") + 1] for w in workers) == HOSTS[1:]
    for worker in workers:
        assert worker[worker.index("--address") + 1] == address

    rlbench = [c for c in cmds if c[0] == "rlbench"]
    assert rlbench == [["rlbench", "run", "--ray-address", address, "--parallel", "nodes=3", *USER_ARGS]]
    # The head comes up before its workers, and rlbench after both.
    assert cmds.index(head) < min(cmds.index(w) for w in workers) < cmds.index(rlbench[0])

    # `ray stop` on every node, after rlbench (the EXIT trap).
    stops = [c for c in cmds if ray_args(c) == ["stop"]]
    assert sorted(s[s.index("-w") + 1] for s in stops) == HOSTS
    assert min(cmds.index(s) for s in stops) > cmds.index(rlbench[0])


def test_dry_run_sweep_and_port(tmp_path):
    cmds = commands(run_script(tmp_path, "--framework", "verl", RLBENCH_COMMAND="sweep", RAY_PORT="6380"))
    rlbench = [c for c in cmds if "rlbench" in c]
    expected = ["env", f"RAY_ADDRESS={HEAD_IP}:6380", "rlbench", "sweep", "--parallel", "nodes=3"]
    expected += ["--framework", "verl"]
    assert rlbench == [expected]
    assert any("--port=6380" in c for c in cmds)


@pytest.mark.parametrize(
    ("overrides", "words"),
    [({"SLURM_JOB_NODELIST": None}, "SLURM_JOB_NODELIST"), ({"RLBENCH_COMMAND": "train"}, "RLBENCH_COMMAND")],
)
def test_bad_environment_is_one_line(tmp_path, overrides, words):
    result = run_script(tmp_path, *USER_ARGS, **overrides)
    assert result.returncode != 0
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0], result.stderr
