"""Whether TRL's rollout can use the vLLM installed here (TRL's own [vllm] extra says which), and the install
command of the README's TRL GPU recipe.
"""

from __future__ import annotations

from rlbench.adapters.common import declared_requirements
from rlbench.harness.spec.environment import package_version


def vllm_range() -> str | None:
    """The vLLM versions the installed TRL's own `[vllm]` extra accepts (">=0.22.0,<=0.31.0" for TRL 1.16)."""
    for req in declared_requirements("trl"):
        if req.name == "vllm" and req.marker is not None and req.marker.evaluate({"extra": "vllm"}):
            return str(req.specifier)
    return None


def gpu_install_command() -> str:
    return f"pip install 'trl[vllm]=={package_version('trl') or '1.16.0'}' 'vllm=={TESTED_VLLM}'"


# The vLLM of the README's TRL GPU recipe: inside TRL 1.16's range, and the release OpenRLHF 0.11.2 pins, so two
# frameworks' rollouts run one engine version where their pins allow it.
TESTED_VLLM = "0.29.0"


def vllm_problem() -> str | None:
    """A vLLM TRL's colocated rollout does not support, named with the fix; None when absent (transformers
    generates instead) or inside TRL's own range."""
    from packaging.specifiers import SpecifierSet

    vllm, accepted = package_version("vllm"), vllm_range()
    if vllm is None or not accepted or SpecifierSet(accepted).contains(vllm, prereleases=True):
        return None
    return (
        f"vLLM {vllm} is installed, but TRL {package_version('trl')} supports vllm{accepted} (its [vllm] extra); "
        f"{gpu_install_command()}"
    )
