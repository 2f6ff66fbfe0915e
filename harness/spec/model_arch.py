"""A model's architecture, as the performance model and the knob checks need it, found offline.

From a workload's tiny-model spec, a model folder's or file's config.json, the Hugging Face
cache's copy of a hub model's config.json, or the built-in table of published configs; never
the network. The adapters check head and layer splits with it before launch; the prediction
prices the run with it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from rlbench.harness.errors import RLBenchError
from rlbench.harness.perfmodel import ModelArch, from_hf_config, get_arch, load_hf_config
from rlbench.workloads.spec import ModelSpec
from rlbench.workloads.tiny_model import hf_config_fields


def arch_for(model: str) -> ModelArch:
    """Architecture from a model folder's config.json, a config.json path, the Hugging Face cache's copy of
    a hub model's config.json (offline), or the built-in table."""
    path = Path(model)
    if path.is_dir() and (path / "config.json").is_file() or path.suffix == ".json" and path.is_file():
        return load_hf_config(path)
    if path.suffix == ".json":  # a file name, not an architecture name: say it is missing
        raise RLBenchError(
            f"model config {model}: no such file; pass an existing config.json, a model folder or a built-in name"
        )
    if path.is_dir():
        raise RLBenchError(f"model folder {model} has no config.json; pass the folder of a Hugging Face model")
    cached = _hub_cached_config(model)
    if cached:
        try:
            return dataclasses.replace(load_hf_config(cached), name=model, source=str(cached))
        except (RLBenchError, ValueError):
            pass  # a config the model cannot read (not a decoder-only LM): the table may still know the name
    return get_arch(model)


def _hub_cached_config(repo: str) -> Path | None:
    """The Hugging Face cache's config.json of a hub model (an `org/name` id), never the network."""
    if Path(repo).exists() or repo.count("/") != 1:
        return None
    return hub_cached_file(repo, "config.json")


def hub_cached_file(repo: str, filename: str) -> Path | None:
    """The local Hugging Face cache's copy of a hub repo's file, never the network; None where it is not there
    (or huggingface_hub is not installed, or `repo` is not a valid id)."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    try:
        found = try_to_load_from_cache(repo, filename)
    except ValueError:  # not a valid repo id
        return None
    return Path(found) if isinstance(found, str) else None


def workload_arch(model: ModelSpec) -> ModelArch | None:
    """A workload model's architecture from its own config, offline, or None where none is here.

    In order: the tiny model's spec (the config `tiny_model` builds), a local folder's or file's
    config.json, the Hugging Face cache's copy of the hub model's config.json, then rlbench's built-in
    table (values from each model's published config.json)."""
    if model.tiny is not None:  # read from the config the tiny model is built from: one mapping of its fields
        fields = hf_config_fields(model.tiny, model.tiny.vocab_size)
        return dataclasses.replace(from_hf_config(fields, name="tiny"), source="workload model.tiny")
    try:
        return arch_for(model.name)
    except (RLBenchError, ValueError):
        return None
