"""RunSpec: everything that defines one benchmark run, resolved before launch."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rlbench.harness.errors import RLBenchError
from rlbench.harness.settings import check_environment, run_timeout_s
from rlbench.harness.spec.parallel import Parallelism
from rlbench.harness.spec.profile import ProfileRequest, parse_profile
from rlbench.workloads.spec import Workload

# The largest seed numpy and torch both take (numpy's seeds are below 2**32): `run --seed`, a nightly entry's and a
# sweep's seeds (with --vary-seed, its last repeat's) are bounded by it before anything starts.
MAX_SEED = 2**32 - 1


def check_seed(seed: object, where: str = "--seed") -> int:
    """The seed, or one line naming where it came from and the range it must be in."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise RLBenchError(f"{where} {seed!r}: must be a whole number from 0 to {MAX_SEED}")
    return seed


@dataclass(frozen=True, kw_only=True, slots=True)
class RunSpec:
    framework: str
    workload: Workload
    parallel: Parallelism
    seed: int = 0
    out: Path = Path("results")
    timeout_s: float = 7200.0
    # A running Ray cluster the framework's driver joins (host:port of its GCS, as RAY_ADDRESS); None: the
    # framework starts its own Ray on this host, as it does by default.
    ray_address: str | None = None
    # A profiler over a window of steps (`--profile`), or None.
    profile: ProfileRequest | None = None


def build_run_spec(
    framework: str,
    workload: str,
    parallel: tuple[str, ...] | list[str],
    *,
    steps: int | None,
    seed: int,
    out: Path,
    ray_address: str | None = None,
    profile: str | None = None,
    profile_steps: str | None = None,
) -> RunSpec:
    """The spec of `rlbench run` (and of each nightly benchmark): workload by name or path, --steps applied."""
    from rlbench.harness.spec.parallel import parse_parallel
    from rlbench.workloads.catalog import load_workload

    loaded = load_workload(workload)
    check_environment()  # a bad RLBENCH_* setting is refused before anything is built or launched
    check_seed(seed)
    loaded = loaded.with_steps(steps) if steps else loaded
    return RunSpec(
        framework=framework,
        workload=loaded,
        parallel=parse_parallel(parallel),
        seed=seed,
        out=out,
        timeout_s=run_timeout_s(),
        ray_address=check_ray_address(ray_address),
        profile=parse_profile(profile, profile_steps, steps=loaded.steps, warmup=loaded.warmup_steps),
    )


def check_ray_address(address: str | None) -> str | None:
    """`--ray-address` as given (host:port, or ray://host:port for Ray Client), or one line saying what is
    wrong with it; empty means none."""
    from rlbench.harness.errors import RLBenchError

    if address is None or not address.strip():
        return None
    address = address.strip()
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if address == "auto" or (sep and host and port.isdigit() and 0 < int(port) < 65536):
        return address
    raise RLBenchError(
        f"--ray-address {address!r}: expected HOST:PORT of the Ray cluster's head (its GCS, e.g. 10.0.0.1:6379), "
        "or auto; start one with `ray start --head`"
    )
