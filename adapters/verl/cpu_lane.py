"""verl 0.9.1 on CPU: a CPU platform for verl's registry and the few calls that assume CUDA.

verl's FSDP2 engine, its vLLM async server and its Ray controller run unchanged; what
this module changes is listed in SHIMS (each names the upstream code it works around).
Launch settings the lane substitutes (trainer.device=cpu, FSDP2, sdpa, ...) are in the
verl adapter's config.py (CPU_LANE), because they are plain config overrides.
"""

from __future__ import annotations

import os
import socket
import types
from contextlib import contextmanager
from types import ModuleType

from rlbench.adapters.cpu_lane import Shim, after_import, require, torch_shims, vllm_shims

RELEASE = "verl 0.9.1"

SHIMS = (
    Shim(
        "verl/plugin/platform/platform_manager.py: PlatformRegistry",
        "verl registers nvidia, npu and rocm platforms only; the lane registers a 'cpu' platform (selected by "
        "VERL_PLATFORM=cpu): device 'cpu', gloo collectives, no CUDA IPC (weights go to vLLM by shared memory), "
        "no-op memory and stream calls, Ray's logical GPU resource",
    ),
    Shim(
        "verl/utils/distributed.py: initialize_global_process_group(_ray)",
        "verl builds the backend string 'cpu:gloo,<device>:<backend>', which on CPU is 'cpu:gloo,cpu:gloo' and "
        "torch rejects as a duplicate; the lane passes 'gloo'",
    ),
    *torch_shims.SHIMS,
    *vllm_shims.SHIMS,
)


def _device_module() -> ModuleType:
    """torch.cpu plus the torch.cuda calls verl makes on its device module, as no-ops or CPU equivalents."""
    import torch

    module = types.ModuleType("rlbench_cpu_device")
    for name in dir(torch.cpu):
        if not name.startswith("__"):
            setattr(module, name, getattr(torch.cpu, name))
    module.__dict__.update(
        current_device=lambda: "cpu",
        device_count=lambda: 1,
        is_available=lambda: True,
        set_device=lambda *a, **k: None,
        synchronize=lambda *a, **k: None,
        empty_cache=lambda: None,
        manual_seed=torch.manual_seed,
        manual_seed_all=torch.manual_seed,
        # Host memory is not device memory: verl's perf/max_memory_* read 0 here, and rlbench records them as absent.
        memory_allocated=lambda *a, **k: 0,
        max_memory_allocated=lambda *a, **k: 0,
        memory_reserved=lambda *a, **k: 0,
        max_memory_reserved=lambda *a, **k: 0,
        reset_peak_memory_stats=lambda *a, **k: None,
        mem_get_info=lambda *a, **k: (0, 0),
        get_device_name=lambda *a, **k: "cpu",
    )
    return module


def _register_platform(manager: ModuleType) -> None:
    registry = require(manager, "PlatformRegistry", RELEASE)
    from verl.plugin.platform.platform_base import PlatformBase

    device = _device_module()

    class PlatformCPU(PlatformBase):
        device_name = property(lambda self: "cpu")
        vendor_name = property(lambda self: "cpu")
        device_module = property(lambda self: device)

        def is_available(self):
            return True

        def current_device(self):
            return "cpu"  # as torch.cpu answers: .to(0) would mean cuda:0

        def device_count(self):
            return 1

        def set_device(self, device_index):
            pass

        def synchronize(self, device_index=None):
            pass

        def manual_seed(self, seed):
            device.manual_seed(seed)

        def manual_seed_all(self, seed):
            device.manual_seed(seed)

        def set_allocator_settings(self, settings):
            pass

        def empty_cache(self):
            pass

        def get_device_capability(self, device_index=0):
            return None, None

        def communication_backend_name(self):
            return "gloo"

        def visible_devices_envvar(self):
            return "CUDA_VISIBLE_DEVICES"

        def profiler_start(self):
            pass

        def profiler_stop(self):
            pass

        def ray_resource_name(self):
            return "GPU"  # the lane's Ray declares logical GPUs to place workers

        def ray_noset_envvars(self):
            return ["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"]

        def is_ipc_supported(self):
            return False

        def cudart(self):
            return None

        @contextmanager
        def nvtx_range(self, msg):
            yield

    registry.register(platform="cpu")(PlatformCPU)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _single_gloo_backend(distributed: ModuleType) -> None:
    import torch.distributed

    for name in ("initialize_global_process_group", "initialize_global_process_group_ray"):
        require(distributed, name, RELEASE)
    original = torch.distributed.init_process_group
    if getattr(original, "_rlbench", False):
        return

    def init_process_group(*args, backend=None, **kwargs):
        if isinstance(backend, str) and set(backend.split(",")) == {"cpu:gloo"}:
            backend = "gloo"
        try:
            return original(*args, backend=backend, **kwargs)
        except torch.distributed.DistNetworkError as exc:
            # verl's worker group picks MASTER_PORT free and binds it only here; on a busy host another process
            # (Ray starts many) can take it in between. The lane's one rank has nobody waiting on the old port,
            # so one retry on a fresh port is safe; with more ranks the error stands.
            world = kwargs.get("world_size", os.environ.get("WORLD_SIZE", "1"))
            if "EADDRINUSE" not in str(exc) or str(world) != "1":
                raise
            os.environ["MASTER_PORT"] = str(_free_port())
            return original(*args, backend=backend, **kwargs)

    init_process_group._rlbench = True  # type: ignore[attr-defined]
    torch.distributed.init_process_group = init_process_group


def install() -> None:
    torch_shims.install()
    vllm_shims.install()
    after_import("verl.plugin.platform.platform_manager", _register_platform)
    after_import("verl.utils.distributed", _single_gloo_backend)
