"""Sessions that set rlbench up from nothing and run it: `nox -s tests`, `nox -s demo`, `nox -s nightly`.

Each session installs into its own virtualenv. torch is pinned to the CPU build
tested here (2.13.0); set RLBENCH_TORCH to another requirement (e.g. "torch" for a
CUDA build on a GPU machine) to change it.
"""

from __future__ import annotations

import os

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
