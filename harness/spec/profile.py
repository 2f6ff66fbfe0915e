"""A profiler switched on for a window of steps (`rlbench run --profile torch --profile-steps 3-4`), one request
for every framework; each adapter maps it to the framework's own mechanism or refuses it in one line.

    from rlbench.harness.spec.profile import parse_profile
    parse_profile("torch", "2-3", steps=6, warmup=1)   # ProfileRequest(tool="torch", first_step=2, last_step=3)
"""

from __future__ import annotations

from dataclasses import dataclass

from rlbench.harness.errors import RLBenchError

TOOLS = ("torch", "nsys")
PROFILE_DIR = "profile"  # under the run's record folder


@dataclass(frozen=True, kw_only=True, slots=True)
class ProfileRequest:
    tool: str  # one of TOOLS
    first_step: int  # RL steps, 1-based, inclusive
    last_step: int

    def to_dict(self) -> dict[str, object]:
        return {"tool": self.tool, "steps": [self.first_step, self.last_step]}


def parse_profile(tool: str | None, steps_text: str | None, *, steps: int, warmup: int) -> ProfileRequest | None:
    """The request, or None without --profile; --profile-steps defaults to the first step after warm-up."""
    if tool is None:
        if steps_text is not None:
            raise RLBenchError("--profile-steps needs --profile torch (or nsys)")
        return None
    if tool not in TOOLS:
        raise RLBenchError(f"--profile {tool}: must be one of {', '.join(TOOLS)}")
    if steps_text is None:
        first = last = min(warmup + 1, steps)
    else:
        head, _, tail = steps_text.partition("-")
        try:
            first, last = int(head), int(tail or head)
        except ValueError:
            raise RLBenchError(f"--profile-steps {steps_text}: give a step or a range, e.g. 2 or 2-3") from None
        if not 1 <= first <= last <= steps:
            raise RLBenchError(f"--profile-steps {steps_text}: must be within the run's steps 1-{steps}, first <= last")
    return ProfileRequest(tool=tool, first_step=first, last_step=last)
