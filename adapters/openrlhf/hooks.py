"""rlbench's hooks inside OpenRLHF's processes, on the GPU launch and the CPU lane alike: the real start and end
of each timed stage call (the span log read back by the adapter's read_spans), and torch.profiler around the
RL steps of `--profile torch` in the trainer's controller and in each actor training rank.

    RLBENCH_HOOKS=rlbench.adapters.openrlhf.hooks RLBENCH_OPENRLHF_SPANS=run/openrlhf_spans.jsonl python -m ...

Every process of the run imports this through the site hook (adapters/cpu_lane/site/sitecustomize.py, which
the adapter puts on PYTHONPATH with RLBENCH_HOOKS naming this module); `install` patches OpenRLHF 0.11.2's
classes right after their module is first imported, so a process that never imports the trainer loads nothing.
OpenRLHF times its stages (trainer/ppo_trainer.py: fit, train_step) as durations only; the same calls are
stamped here. Environment, set by the adapter: RLBENCH_OPENRLHF_SPANS (the span log, one JSON object a line),
RLBENCH_OPENRLHF_PROFILE (JSON {"tool", "steps": [first, last], "dir"}; unset: no profiler).
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import time
import types
from pathlib import Path
from types import ModuleType
from typing import Any

from rlbench.adapters.cpu_lane import after_import, require

RELEASE = "OpenRLHF 0.11.2"
SPANS_ENV = "RLBENCH_OPENRLHF_SPANS"
PROFILE_ENV = "RLBENCH_OPENRLHF_PROFILE"

# This process's place in the run. The controller (PPOTrainer, or the async TrainingActor) learns the step from
# train_step's global_step; a generation belongs to the step its rollout feeds, the (n+1)-th after n non-empty
# ones (OpenRLHF retries empty rollouts, and the async generator runs ahead in its own process). An actor rank
# counts its weight syncs: each step ends with one (BasePPOTrainer.train_step, PPOTrainerAsync.fit).
_STATE: dict[str, Any] = {"step": 0, "generations": 0, "syncs": 0, "trainer": False, "policy": False}


@functools.cache
def _profile() -> dict[str, Any] | None:
    text = os.environ.get(PROFILE_ENV)
    return json.loads(text) if text else None


def log_span(step: int, stage: str, start: float, end: float) -> None:
    """Append one span line; a short line appended in one write does not interleave with other processes'."""
    _append({"step": step, "stage": stage, "start_unix_s": start, "end_unix_s": end, "pid": os.getpid()})


def _append(line: dict[str, Any]) -> None:
    """One JSON line onto the span log, in one write, where the run names one."""
    path = os.environ.get(SPANS_ENV)
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(line) + "\n")


def _stamped(stage: str, method):
    """`method`, each call logged with its start and end under `stage`, at the controller's step when it began."""

    @functools.wraps(method)
    def stamped(self, *args, **kwargs):
        step, start = _STATE["step"], time.time()
        try:
            return method(self, *args, **kwargs)
        finally:
            log_span(step, stage, start, time.time())

    return stamped


class _Window:
    """torch.profiler over steps first..last in one process. The trace is exported at the process's next call
    (or exit), not when the window closes: the export then falls outside the profiled steps' timers."""

    def __init__(self, role: str) -> None:
        self.role, self.profiler, self.done, self.pending = role, None, False, None

    def start(self, step: int) -> None:
        request = _profile()
        if request is None or self.done or self.profiler is not None or step != request["steps"][0]:
            return
        import torch

        activities = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        self.profiler = torch.profiler.profile(activities=activities)
        self.profiler.__enter__()
        atexit.register(self.export)

    def stop(self, step: int) -> None:
        request = _profile()
        if self.profiler is None or request is None or step < request["steps"][1]:
            return
        self.profiler.__exit__(None, None, None)
        first, last = request["steps"]
        name = f"torch-steps-{first}-{last}-{self.role}{_rank_suffix()}.json"
        self.pending, self.profiler, self.done = (self.profiler, Path(request["dir"]) / name), None, True

    def export(self) -> None:
        if self.pending is None:
            return
        profiler, path = self.pending
        self.pending = None
        path.parent.mkdir(parents=True, exist_ok=True)
        profiler.export_chrome_trace(str(path))


def _rank_suffix() -> str:
    import torch.distributed as dist

    return f"-rank{dist.get_rank()}" if dist.is_available() and dist.is_initialized() else f"-pid{os.getpid()}"


CONTROLLER, ACTOR = _Window("controller"), _Window("actor")


def _trainer(module: ModuleType) -> None:
    """The controller: BasePPOTrainer's train_step (the step), ppo_train and the weight sync. The trainer classes
    are Ray actors, and `ray.remote` copies every inherited method onto the actor class while this module's body
    runs, before a patch to the base could apply; so the patched __init__ (which Ray's copy still calls) binds
    the stamped methods on each trainer instance, where `self.train_step(...)` finds them first."""
    base = require(module, "BasePPOTrainer", RELEASE)
    init = require(base, "__init__", RELEASE)
    for name in ("train_step", "ppo_train", "broadcast_to_vllm"):
        require(base, name, RELEASE)

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        _STATE["trainer"] = True
        init(self, *args, **kwargs)
        cls = type(self)
        self.train_step = types.MethodType(_train_step(cls.train_step), self)
        self.ppo_train = types.MethodType(_stamped("update_actor", cls.ppo_train), self)
        self.broadcast_to_vllm = types.MethodType(_stamped("weight_sync", cls.broadcast_to_vllm), self)

    base.__init__ = __init__


def _train_step(train_step):
    @functools.wraps(train_step)
    def step(self, rollout_samples, global_step, *args, **kwargs):
        CONTROLLER.export()
        _STATE["step"] = global_step + 1  # OpenRLHF logs the step train_step returns: global_step + 1
        CONTROLLER.start(_STATE["step"])  # the async trainer generates elsewhere: its window opens here
        try:
            return train_step(self, rollout_samples, global_step, *args, **kwargs)
        finally:
            CONTROLLER.stop(_STATE["step"])

    return step


def _experience_maker(module: ModuleType) -> None:
    maker = require(module, "RemoteExperienceMaker", RELEASE)
    # OpenRLHF's timing/make_experience: the actor's old log-probs, the reference's (and critic's) passes,
    # the advantages; rlbench records it as old_log_prob (the adapter's MAKE_EXPERIENCE).
    batch = require(maker, "make_experience_batch", RELEASE)
    maker.make_experience_batch = _stamped("old_log_prob", batch)


def _samples_generator(module: ModuleType) -> None:
    generator = require(module, "SamplesGenerator", RELEASE)
    generate = require(generator, "generate_samples", RELEASE)

    @functools.wraps(generate)
    def generate_samples(self, *args, **kwargs):
        step = _STATE["generations"] + 1
        if _STATE["trainer"]:  # the controller's window opens with the step's rollout
            CONTROLLER.export()
            CONTROLLER.start(step)
        start = time.time()
        out = generate(self, *args, **kwargs)
        log_span(step, "gen", start, time.time())  # timing/generation: vLLM's rollout and the rewards
        if out[0]:  # the rollout samples: an empty one (all filtered) is retried for the same step
            _STATE["generations"] += 1
            log_lengths(step, out[0])
        return out

    generator.generate_samples = generate_samples


def log_lengths(step: int, experiences: Any) -> None:
    """Append each generated response's length (OpenRLHF's Experience.response_length: the tokens vLLM
    generated) to the span log as one "lengths" line; a sample without one is left out, never an error."""
    lengths = []
    for experience in experiences:
        try:
            lengths.extend(int(n) for n in experience.response_length.reshape(-1).tolist())
        except (AttributeError, TypeError, ValueError):
            continue
    if lengths:
        _append({"step": step, "lengths": lengths, "pid": os.getpid()})


def log_forward(step: int, rows: int, width: int) -> None:
    """Append one policy forward pass's batch shape (rows x the width every row is computed at) to the span log;
    the adapter's reader takes the lines with a "forward" key, the span reader skips them."""
    _append({"step": step, "forward": {"rows": rows, "width": width}, "pid": os.getpid()})


def _actor_model(module: ModuleType) -> None:
    """A policy rank's step opens with its first forward pass (make_experience's old log-probs); the reference
    model, the same class in another process, is left alone (no ActorPPOTrainer there). Without packing each
    pass computes a right-padded batch, every row at its longest sequence: its shape is logged, as the
    performance model prices that width (with packing the pads are removed before the model runs)."""
    actor = require(module, "Actor", RELEASE)
    forward = require(actor, "forward", RELEASE)

    @functools.wraps(forward)
    def stepped(self, *args, **kwargs):
        if _STATE["policy"]:
            _actor_step_begins()
            sequences = kwargs.get("sequences", args[0] if args else None)
            if not getattr(self, "packing_samples", True) and getattr(sequences, "ndim", 0) == 2:
                log_forward(_STATE["syncs"] + 1, *map(int, sequences.shape))
        return forward(self, *args, **kwargs)

    actor.forward = stepped


def _actor_step_begins() -> None:
    ACTOR.export()
    ACTOR.start(_STATE["syncs"] + 1)


def _ppo_actor(module: ModuleType) -> None:
    """ActorPPOTrainer: the rank's update (a fallback start of its step) and its weight sync (the step's end)."""
    trainer = require(module, "ActorPPOTrainer", RELEASE)
    init = require(trainer, "__init__", RELEASE)
    ppo_train, broadcast = require(trainer, "ppo_train", RELEASE), require(trainer, "broadcast_to_vllm", RELEASE)

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        _STATE["policy"] = True  # this process trains the policy (PolicyModelActor builds one ActorPPOTrainer)
        init(self, *args, **kwargs)

    @functools.wraps(ppo_train)
    def train(self, *args, **kwargs):
        _actor_step_begins()
        return ppo_train(self, *args, **kwargs)

    @functools.wraps(broadcast)
    def broadcast_to_vllm(self, *args, **kwargs):
        try:
            return broadcast(self, *args, **kwargs)
        finally:
            _STATE["syncs"] += 1
            ACTOR.stop(_STATE["syncs"])

    trainer.__init__, trainer.ppo_train, trainer.broadcast_to_vllm = __init__, train, broadcast_to_vllm


def _strategy(module: ModuleType) -> None:
    """The final save (train_ppo_ray after fit) is the actor's last call: the trace of a window ending with the
    run is exported there, before Ray ends the process."""
    strategy = require(module, "DeepspeedStrategy", RELEASE)
    save = require(strategy, "save_model", RELEASE)

    @functools.wraps(save)
    def save_model(self, *args, **kwargs):
        ACTOR.export()
        return save(self, *args, **kwargs)

    strategy.save_model = save_model


def _logger(module: ModuleType) -> None:
    """The controller's trace is exported once the profiled step's scalars are logged (their wall time is the
    step's recorded end), so the export never lengthens a recorded step."""
    tensorboard = require(module, "TensorboardLogger", RELEASE)
    log_train = require(tensorboard, "log_train", RELEASE)

    @functools.wraps(log_train)
    def logged(self, *args, **kwargs):
        try:
            return log_train(self, *args, **kwargs)
        finally:
            CONTROLLER.export()

    tensorboard.log_train = logged


def install() -> None:
    """Patch OpenRLHF's classes as their modules are imported (called by the site hook)."""
    if not os.environ.get(SPANS_ENV) and not os.environ.get(PROFILE_ENV):
        return
    after_import("openrlhf.trainer.ppo_trainer", _trainer)
    after_import("openrlhf.trainer.ppo_utils.experience_maker", _experience_maker)
    after_import("openrlhf.trainer.ppo_utils.samples_generator", _samples_generator)
    after_import("openrlhf.models.actor", _actor_model)
    after_import("openrlhf.trainer.ray.ppo_actor", _ppo_actor)
    after_import("openrlhf.utils.deepspeed.deepspeed", _strategy)
    after_import("openrlhf.utils.logging_utils", _logger)
