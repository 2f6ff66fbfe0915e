"""OpenRLHF 0.11.2 on CPU: DeepSpeed's CPU accelerator, one vLLM CPU engine, weights over gloo.

OpenRLHF's trainer, its Ray actors, DeepSpeed ZeRO-3 and vLLM run unchanged; what this
module changes is listed in SHIMS (each names the upstream code it works around).
Flags the lane substitutes (non-colocated placement, sdpa, fixed micro-batches, ...)
are in the OpenRLHF adapter. Environment it reads, all set by the adapter:
RLBENCH_OPENRLHF_FP32 (train and generate in float32), RLBENCH_LANE_RAY_GPUS/_CPUS
(logical Ray resources), RLBENCH_OPENRLHF_SYNC_LOG (the weight-sync checksums file).
"""

from __future__ import annotations

import json
import os
import sys
import time
import types
from types import ModuleType

from rlbench.adapters.cpu_lane import (
    Shim,
    after_import,
    after_import_under,
    before_import,
    require,
    torch_shims,
    vllm_shims,
)

RELEASE = "OpenRLHF 0.11.2"
SYNC_LOG_ENV = "RLBENCH_OPENRLHF_SYNC_LOG"
FP32_ENV = "RLBENCH_OPENRLHF_FP32"

SHIMS = (
    Shim(
        "openrlhf/** (ppo_actor, launcher, deepspeed.py, ...): module-global torch.cuda calls",
        "OpenRLHF calls torch.cuda.current_device/set_device/synchronize/empty_cache/current_stream "
        "unconditionally; inside openrlhf modules only, torch.cuda answers 'cpu' or does nothing",
    ),
    Shim(
        "openrlhf/utils/distributed_util.py: torch_dist_barrier_and_cuda_sync",
        "a CUDA synchronize after the barrier; the lane keeps the barrier only",
    ),
    Shim(
        "openrlhf/utils/distributed_util.py: stateless_init_process_group",
        "the weight-sync group is vLLM's PyNccl communicator; the lane builds a gloo group (TCPStore) with "
        "the same broadcast call",
    ),
    Shim(
        "openrlhf/trainer/ppo_utils/replay_buffer.py: NaiveReplayBuffer",
        "its target device is torch.device('cuda:<current>'); the lane's is cpu",
    ),
    Shim(
        "openrlhf/utils/deepspeed/deepspeed.py: DeepspeedStrategy.setup_distributed",
        "init_device_mesh('cuda', ...); the lane's mesh is on cpu",
    ),
    Shim(
        "openrlhf/models/ring_attn_utils.py: module-level flash_attn imports",
        "flash-attn is CUDA-only; pure-torch index_first_axis/pad_input/unpad_input/rearrange/all_gather are "
        "visible to that module's import only (ring attention itself is not used: sp=1)",
    ),
    Shim(
        "openrlhf/trainer/ray/vllm_worker_wrap.py: WorkerWrap.update_weight",
        "receives each weight into a CUDA buffer on the current CUDA stream; the lane receives into a CPU "
        "buffer over gloo, and logs a checksum of vLLM's weights after each sync (the lane's proof)",
    ),
    Shim(
        "openrlhf/trainer/ray/ppo_actor.py: ActorPPOTrainer.broadcast_to_vllm",
        "logs a checksum of the actor's weights and its optimizer step count before each broadcast, to "
        "compare with vLLM's after it",
    ),
    Shim(
        "openrlhf/cli/train_ppo_ray.py: train(), ray.init",
        "a local Ray on a CPU machine has no GPU resource and OpenRLHF's placement groups ask for GPUs; the "
        "lane's ray.init declares logical GPUs and CPUs",
    ),
    Shim(
        "openrlhf/cli/train_ppo_ray.py --ds.param_dtype, openrlhf/utils/utils.py: convert_to_torch_dtype, "
        "openrlhf/trainer/ray/vllm_engine.py: AsyncEngineArgs dtype",
        "bf16/fp16 only and vLLM hard-coded to bfloat16; for float32 workloads the lane accepts fp32 (DeepSpeed's "
        "bf16 and fp16 both off) and builds vLLM in float32, so OpenRLHF trains as verl and TRL do on CPU",
    ),
    *torch_shims.SHIMS,
    *vllm_shims.SHIMS,
)


class _CpuCuda:
    """torch.cuda as OpenRLHF's modules see it on the lane."""

    def __getattr__(self, name):
        import torch

        return getattr(torch.cuda, name)

    current_device = staticmethod(lambda: "cpu")  # as torch.cpu answers: a CPU tensor's device
    set_device = staticmethod(lambda *a, **k: None)
    synchronize = staticmethod(lambda *a, **k: None)
    empty_cache = staticmethod(lambda: None)
    current_stream = staticmethod(lambda *a, **k: None)


_PROXY: ModuleType | None = None


def torch_proxy() -> ModuleType:
    """`torch` with `.cuda` replaced; picklable by reference (Ray pickles actor methods with their globals)."""
    global _PROXY
    if _PROXY is None:
        import torch

        class TorchOnCPU(types.ModuleType):
            def __getattr__(self, name):
                return getattr(torch, name)

            def __reduce__(self):
                return (torch_proxy, ())

        _PROXY = TorchOnCPU("torch")
        _PROXY.cuda = _CpuCuda()
    return _PROXY


def _proxy_torch(module: ModuleType) -> None:
    import torch

    if module.__dict__.get("torch") is torch:
        module.torch = torch_proxy()


class _GlooBroadcaster:
    """What OpenRLHF uses of vLLM's PyNcclCommunicator (broadcast from rank 0), on a stateless gloo group."""

    def __init__(self, host, port, rank, world_size):
        from datetime import timedelta

        from torch.distributed import PrefixStore
        from torch.distributed.distributed_c10d import ProcessGroupGloo

        timeout = timedelta(minutes=30)
        self._store = torch_shims.tcp_store(host, port, world_size, is_master=(rank == 0), timeout=timeout)
        self.rank, self.pg = (
            rank,
            ProcessGroupGloo(PrefixStore("openrlhf_weight_sync", self._store), rank, world_size, timeout),
        )

    def broadcast(self, tensor, src=0, stream=None):
        from torch.distributed import BroadcastOptions

        options = BroadcastOptions()
        options.rootRank, options.rootTensor = src, 0
        self.pg.broadcast([tensor], options).wait()
        return tensor


def _distributed_util(module: ModuleType) -> None:
    for name in ("torch_dist_barrier_and_cuda_sync", "stateless_init_process_group"):
        require(module, name, RELEASE)

    def torch_dist_barrier_and_cuda_sync():
        import torch.distributed

        torch.distributed.barrier()

    def stateless_init_process_group(master_address, master_port, rank, world_size, device=None):
        return _GlooBroadcaster(master_address, master_port, rank, world_size)

    module.torch_dist_barrier_and_cuda_sync = torch_dist_barrier_and_cuda_sync
    module.stateless_init_process_group = stateless_init_process_group


class _ReplayBufferTorch(types.ModuleType):
    def __getattr__(self, name):
        return getattr(torch_proxy(), name)

    @staticmethod
    def device(spec, *args):
        import torch

        return torch.device("cpu") if str(spec).startswith("cuda") else torch.device(spec, *args)

    def __reduce__(self):
        return (_ReplayBufferTorch, ("torch",))


def _replay_buffer(module: ModuleType) -> None:
    require(module, "NaiveReplayBuffer", RELEASE)
    module.torch = _ReplayBufferTorch("torch")


def _deepspeed_strategy(module: ModuleType) -> None:
    original = require(module, "init_device_mesh", RELEASE)

    def init_device_mesh(device_type, *args, **kwargs):
        return original("cpu" if device_type == "cuda" else device_type, *args, **kwargs)

    module.init_device_mesh = init_device_mesh


def _flash_attn_stand_ins() -> dict[str, ModuleType]:
    """The four flash_attn helpers ring_attn_utils imports, in pure torch (same shapes and semantics)."""
    import torch
    import torch.nn.functional as F

    def rearrange(x, pattern):  # the one einops pattern ring_attn_utils uses
        if pattern.replace(" ", "") != "bs...->(bs)...":
            raise NotImplementedError(f"rlbench CPU lane: rearrange pattern {pattern!r}")
        return x.reshape(-1, *x.shape[2:])

    def index_first_axis(x, indices):
        return x.reshape(-1, *x.shape[1:])[indices] if x.dim() > 1 else x[indices]

    def pad_input(hidden, indices, batch, seqlen):
        out = torch.zeros(batch * seqlen, *hidden.shape[1:], device=hidden.device, dtype=hidden.dtype)
        out[indices] = hidden
        return out.reshape(batch, seqlen, *hidden.shape[1:])

    def unpad_input(hidden, attention_mask, unused_mask=None):
        mask = attention_mask + unused_mask if unused_mask is not None else attention_mask
        seqlens, used = mask.sum(dim=-1, dtype=torch.int32), attention_mask.sum(dim=-1, dtype=torch.int32)
        indices = torch.nonzero(mask.flatten(), as_tuple=False).flatten()
        cu_seqlens = F.pad(torch.cumsum(seqlens, dim=0, dtype=torch.int32), (1, 0))
        return hidden.reshape(-1, *hidden.shape[2:])[indices], indices, cu_seqlens, int(seqlens.max()), used

    def all_gather(x, group):
        import torch.distributed as dist

        out = torch.empty(dist.get_world_size(group) * x.shape[0], *x.shape[1:], dtype=x.dtype, device=x.device)
        dist.all_gather_into_tensor(out, x.contiguous(), group=group)
        return out

    modules = {
        name: types.ModuleType(name)
        for name in ("flash_attn", "flash_attn.bert_padding", "flash_attn.utils", "flash_attn.utils.distributed")
    }
    padding = modules["flash_attn.bert_padding"]
    padding.index_first_axis, padding.pad_input, padding.unpad_input = index_first_axis, pad_input, unpad_input
    padding.rearrange = rearrange
    modules["flash_attn.utils.distributed"].all_gather = all_gather
    return modules


def _lend_flash_attn():
    if "flash_attn" in sys.modules:
        return None
    modules = _flash_attn_stand_ins()
    sys.modules.update(modules)
    return lambda: [sys.modules.pop(name, None) for name in modules]


def checksum(named_parameters) -> dict[str, float]:
    """Sum and absolute sum (float64) of a model's parameters: equal on both sides iff the sync delivered."""
    import torch

    total = absolute = 0.0
    count = 0
    for _, p in named_parameters:
        t = p.detach().to(torch.float64)
        total, absolute, count = total + t.sum().item(), absolute + t.abs().sum().item(), count + t.numel()
    return {"sum": total, "abs_sum": absolute, "numel": count}


def _log_sync(entry: dict) -> None:
    path = os.environ.get(SYNC_LOG_ENV)
    if path:
        with open(path, "a") as f:  # one short line per write: appends from two processes do not interleave
            f.write(json.dumps({**entry, "unix_s": time.time(), "pid": os.getpid()}) + "\n")


def _worker_wrap(module: ModuleType) -> None:
    wrap = require(module, "WorkerWrap", RELEASE)
    init_group = require(wrap, "init_process_group", RELEASE)
    require(wrap, "update_weight", RELEASE)

    def init_process_group(self, *args, **kwargs):
        out = init_group(self, *args, **kwargs)
        _log_sync({"side": "vllm", "event": "loaded", **checksum(self.model_runner.model.named_parameters())})
        return out

    def update_weight(self, name, dtype, shape, empty_cache=False):
        import torch

        assert dtype == self.model_config.dtype, f"mismatch dtype: src {dtype}, dst {self.model_config.dtype}"
        weight = torch.empty(shape, dtype=dtype, device="cpu")
        if self._model_update_with_ray:
            import ray.util.collective as collective

            collective.broadcast(weight, 0, group_name=self._model_update_group)
        else:
            self._model_update_group.broadcast(weight, src=0)
        self.model_runner.model.load_weights(weights=[(name, weight)])
        if empty_cache:  # OpenRLHF sets it on the last parameter of a sync
            self._rlbench_syncs = getattr(self, "_rlbench_syncs", 0) + 1
            _log_sync(
                {
                    "side": "vllm",
                    "event": "synced",
                    "sync": self._rlbench_syncs,
                    **checksum(self.model_runner.model.named_parameters()),
                }
            )

    wrap.init_process_group, wrap.update_weight = init_process_group, update_weight


def _ppo_actor(module: ModuleType) -> None:
    trainer = require(module, "ActorPPOTrainer", RELEASE)
    broadcast = require(trainer, "broadcast_to_vllm", RELEASE)

    def broadcast_to_vllm(self):
        import deepspeed
        import torch

        params = list(self.actor.model.module.named_parameters())
        with deepspeed.zero.GatheredParameters([p for _, p in params], enabled=self.strategy.args.ds.zero_stage == 3):
            if torch.distributed.get_rank() == 0:
                _log_sync(
                    {
                        "side": "actor",
                        "event": "broadcast",
                        "optimizer_steps": int(getattr(self.actor.model, "global_steps", -1)),
                        **checksum(params),
                    }
                )
        return broadcast(self)

    trainer.broadcast_to_vllm = broadcast_to_vllm


def _ray_init(_: ModuleType) -> None:
    import ray

    if getattr(ray.init, "_rlbench", False):
        return
    original = ray.init

    def init(*args, **kwargs):
        if not args and not kwargs.get("address") and not os.environ.get("RAY_ADDRESS"):
            kwargs.setdefault("num_gpus", int(os.environ.get("RLBENCH_LANE_RAY_GPUS", "2")))
            kwargs.setdefault("num_cpus", int(os.environ.get("RLBENCH_LANE_RAY_CPUS", "4")))
            kwargs.setdefault("include_dashboard", False)
        return original(*args, **kwargs)

    init._rlbench = True  # type: ignore[attr-defined]
    ray.init = init


def _fp32_flag() -> None:
    import argparse

    original = argparse.ArgumentParser.add_argument
    if getattr(original, "_rlbench", False):
        return

    def add_argument(self, *names, **kwargs):
        if "--ds.param_dtype" in names and "choices" in kwargs:
            kwargs["choices"] = [*kwargs["choices"], "fp32"]
        return original(self, *names, **kwargs)

    add_argument._rlbench = True  # type: ignore[attr-defined]
    argparse.ArgumentParser.add_argument = add_argument


def _fp32_dtype(module: ModuleType) -> None:
    import torch

    original = require(module, "convert_to_torch_dtype", RELEASE)
    module.convert_to_torch_dtype = lambda dtype: torch.float32 if dtype == "fp32" else original(dtype)


class _Fp32Vllm(types.ModuleType):
    def __getattr__(self, name):
        import vllm

        return getattr(vllm, name)

    @staticmethod
    def AsyncEngineArgs(*args, **kwargs):
        import vllm

        return vllm.AsyncEngineArgs(*args, **{**kwargs, "dtype": "float32"})

    def __reduce__(self):
        return (_Fp32Vllm, ("vllm",))


def _fp32_vllm(module: ModuleType) -> None:
    require(module, "vllm", RELEASE)
    module.vllm = _Fp32Vllm("vllm")


def install() -> None:
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    torch_shims.install()
    vllm_shims.install()
    after_import_under("openrlhf.", _proxy_torch)
    after_import("openrlhf.utils.distributed_util", _distributed_util)
    after_import("openrlhf.trainer.ppo_utils.replay_buffer", _replay_buffer)
    after_import("openrlhf.utils.deepspeed.deepspeed", _deepspeed_strategy)
    before_import("openrlhf.models.ring_attn_utils", _lend_flash_attn)
    after_import("openrlhf.trainer.ray.vllm_worker_wrap", _worker_wrap)
    after_import("openrlhf.trainer.ray.ppo_actor", _ppo_actor)
    after_import("openrlhf.trainer.ray", _ray_init)  # imported by train_ppo_ray.py before train() runs
    if os.environ.get(FP32_ENV) == "1":
        _fp32_flag()
        after_import("openrlhf.utils.utils", _fp32_dtype)
        after_import("openrlhf.trainer.ray.vllm_engine", _fp32_vllm)
