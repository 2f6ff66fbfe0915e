"""`rlbench compare BASELINE CANDIDATE`: per-metric ratio, significance and verdict of two run records.

Records of different workloads, workload versions, frameworks or parallelism, or
that trained on different problems (run.json's `data` digest), are refused rather
than compared silently (asv drops results whose benchmark version changed). Only
metrics with a direction are compared; warm-up steps are excluded.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlbench.harness.errors import RLBenchError
from rlbench.harness.record.contention import contention
from rlbench.harness.record.read import DamagedRecord, read_record
from rlbench.harness.record.regression import Comparison, compare_samples
from rlbench.harness.record.schema import STEP_METRICS
from rlbench.harness.record.status import RunStatus
from rlbench.harness.spec.equal_work import manifest_changes
from rlbench.workloads.spec import TinyModelSpec


def _load(path: str | Path) -> dict[str, Any]:
    try:
        record = read_record(path)
    except DamagedRecord as exc:
        raise RLBenchError(f"{exc}; compare another record, or restore this one from a copy") from None
    if record["steps"] is None or record.get("status") != RunStatus.SUCCEEDED:
        raise RLBenchError(
            f"{path}: run status is {record.get('status')!r} with no complete steps; compare finished runs"
        )
    return record


def parse_threshold(text: object, where: str = "--threshold") -> float:
    """'5%' or '0.05' -> 0.05; anything else is one RLBenchError naming `where`."""
    raw = str(text).strip()
    try:
        value = float(raw.rstrip("%")) / (100 if raw.endswith("%") else 1)
    except ValueError:
        raise RLBenchError(f"{where} {raw!r}: expected a fraction or a percentage, e.g. 5%") from None
    if not 0 <= value < 1:
        raise RLBenchError(f"{where} {raw!r}: must be in [0%, 100%)")
    return value


_TINY_DEFAULTS = {f.name: f.default for f in dataclasses.fields(TinyModelSpec) if f.default is not dataclasses.MISSING}


def configuration_key(record: dict[str, Any]) -> dict[str, Any]:
    """What must be equal for two records (as `read_record` returns them) to be comparable (steps and seed may
    differ)."""
    workload = {k: v for k, v in record["workload"].items() if k not in ("steps", "warmup_steps")}
    if workload.get("target") is None:  # a newer rlbench's field at its default: older records compare the same
        workload.pop("target", None)
    model = workload.get("model")
    if isinstance(model, dict) and isinstance(model.get("tiny"), dict):
        # Fields a newer rlbench added to the tiny model (the MoE ones) are left out at their defaults, so a
        # record written before they existed and one written after compare as the same dense model.
        tiny = {k: v for k, v in model["tiny"].items() if k not in _TINY_DEFAULTS or v != _TINY_DEFAULTS[k]}
        workload["model"] = {**model, "tiny": tiny}
    # `parallel` as read_record gives it: an older record's `tp` migrated, knobs it predates at their defaults.
    return {"framework": record["framework"]["name"], "workload": workload, "parallel": record["parallel"]}


def data_digest(record: dict[str, Any]) -> str | None:
    """The digest of the problems a run trained on; None in a record written before rlbench recorded it."""
    data = record.get("data")
    digest = data.get("sha256") if isinstance(data, dict) else None
    return digest if isinstance(digest, str) and digest else None


def _data_line(record: dict[str, Any]) -> str:
    data = record["data"]
    revision = f"@{data['revision']}" if data.get("revision") else ""
    return f"{data.get('origin')} {data.get('location')}{revision}, sha256 {data['sha256'][:12]}"


def check_same_data(baseline: str | Path, base: dict[str, Any], candidate: str | Path, cand: dict[str, Any]) -> bool:
    """Refuse two records that trained on different problems; False when either cannot tell (an older record)."""
    digest_b, digest_c = data_digest(base), data_digest(cand)
    if digest_b is None or digest_c is None:
        return False
    if digest_b != digest_c:
        raise RLBenchError(
            f"records trained on different problems: {baseline} read {_data_line(base)}; {candidate} read "
            f"{_data_line(cand)}; compare runs on the same data"
        )
    return True


def compare_records(
    baseline: str | Path, candidate: str | Path, threshold: float, notice: Callable[[str], None] | None = None
) -> list[tuple[str, Comparison]]:
    """Per-metric comparisons; `notice` hears when both arguments are one run (every ratio is then 1)."""
    base, cand = _load(baseline), _load(candidate)
    if notice is not None and (
        Path(baseline).resolve() == Path(candidate).resolve()
        or base.get("run_id") is not None
        and base.get("run_id") == cand.get("run_id")
    ):
        notice(
            f"notice: {baseline} and {candidate} are the same run ({base.get('run_id')}); every ratio is 1 "
            "and nothing can regress: pass two different runs"
        )
    key_b, key_c = configuration_key(base), configuration_key(cand)
    differing = sorted(k for k in key_b if key_b[k] != key_c[k])
    across = differing == ["framework"]  # the suite's purpose: two frameworks on one workload, data and layout
    if differing and not across:
        raise RLBenchError(
            f"records differ in {', '.join(differing)} (e.g. workload version or parallelism); "
            "compare runs of one configuration, or of two frameworks on one workload, data and layout"
        )
    same_data = check_same_data(baseline, base, candidate, cand)
    if across and not same_data:
        raise RLBenchError(
            f"{baseline} or {candidate} does not record the problems it trained on (a record older than run.json "
            "`data`): two frameworks are compared only on data shown to be the same; rerun them"
        )
    if across and notice is not None:
        notice(
            f"notice: two frameworks on equal work: {key_b['framework']} (baseline) and {key_c['framework']}, same "
            f"workload version, data and layout; step_time_s and the stage times follow each framework's own timer "
            f"(each record's equal_work names it); {ACROSS_METRIC} is rlbench's one definition and carries the "
            "verdict (tokens_per_s divides by it, mfu too, over the workload's canonical FLOPs)"
        )
    if not same_data and notice is not None:
        notice(
            "notice: a record written before rlbench recorded its data (run.json `data`): "
            "nothing shows that both runs trained on the same problems"
        )
    for path, record in ((baseline, base), (candidate, cand)) if notice is not None else ():
        if shared := contention(record):  # its times are not what the machine gives the framework alone
            notice(f"notice: {path}: {shared}")
    if notice is not None and not across:  # one configuration: its equal-work terms may have moved since
        for line in manifest_changes(base.get("equal_work"), cand.get("equal_work")):
            notice(f"notice: equal_work differs: {line}")
    results = []
    for name, metric in STEP_METRICS.items():
        if metric.direction == "neutral" or name not in base["steps"] or name not in cand["steps"]:
            continue
        b = base["steps"][base["steps"]["step"] > base["workload"]["warmup_steps"]][name]
        c = cand["steps"][cand["steps"]["step"] > cand["workload"]["warmup_steps"]][name]
        for path, values in ((baseline, b), (candidate, c)):
            if metric.unit in NON_NEGATIVE_UNITS and (values < 0).any():
                raise RLBenchError(
                    f"{path}: {name} has negative values (min {values.min():g} {metric.unit}), which no run can "
                    "measure: a damaged record; compare runs whose records rlbench wrote"
                )
        if b.notna().any() and c.notna().any():
            results.append((name, compare_samples(b, c, direction=metric.direction, threshold=threshold)))
    if not results:
        counts = [
            int((r["steps"]["step"] > r["workload"]["warmup_steps"]).sum()) if "step" in r["steps"] else 0
            for r in (base, cand)
        ]
        raise RLBenchError(
            f"nothing to compare: {baseline} has {counts[0]} post-warm-up step(s) with a metric, {candidate} "
            f"{counts[1]}; rerun with more --steps than the workload's warm-up"
        )
    return results


# Across frameworks, the step time taken the same way for every framework (record/schema.py, step_stamps.py).
ACROSS_METRIC = "wall_step_time_s"


def across_verdict(results: list[tuple[str, Comparison]], baseline: str, candidate: str) -> str:
    """One line for two frameworks on equal work: how the candidate's wall step time compares, with the interval,
    the test and n, in words that stay within what the test can say."""
    found = dict(results).get(ACROSS_METRIC)
    if found is None:
        return f"verdict: no {ACROSS_METRIC} in both records: no verdict across frameworks"
    c = found
    span = f"x{c.ratio:.3g} [{c.ci_low:.3g}, {c.ci_high:.3g}], p = {c.p_value:.2g}, n = {c.n_base}/{c.n_cand}"
    words = {
        "regressed": "slower than",
        "improved": "faster than",
        "unchanged": "as fast as (within the threshold)",
        "inconclusive": "not distinguishable (steps too noisy) from",
        "undecidable": "not distinguishable (too few steps) from",
    }[c.verdict]
    return f"verdict: {candidate} is {words} {baseline} in wall step time ({span})"


# Units of quantities that cannot be negative (times, rates, sizes, energy): a negative one is a damaged record.
NON_NEGATIVE_UNITS = frozenset({"s", "tokens/s", "tokens/s/GPU", "tokens", "GB", "J", "W", "count"})


def format_table(results: list[tuple[str, Comparison]]) -> str:
    lines = [
        f"{'metric':<26} {'unit':<10} {'better':<7} {'n base/cand':>11} {'median base':>12} {'median cand':>12} "
        f"{'ratio':>7} {'95% CI':>17} {'p':>8}  verdict"
    ]
    for name, c in results:
        metric = STEP_METRICS[name]
        lines.append(
            f"{name:<26} {metric.unit:<10} {metric.direction:<7} {f'{c.n_base}/{c.n_cand}':>11} "
            f"{c.median_base:12.4g} {c.median_cand:12.4g} {c.ratio:7.3f} "
            f"[{c.ci_low:6.3f}, {c.ci_high:6.3f}] {c.p_value:8.3g}  {c.verdict}"
        )
    for name, c in results:
        if c.verdict == "inconclusive":
            lines.append(
                f"inconclusive: {name} moved x{c.ratio:.3g} but its steps vary too much for the test to tell "
                f"(p = {c.p_value:.2g} >= 0.05); rerun both with more --steps, on a quiet host"
            )
            break
    undecidable = [c for _, c in results if c.verdict == "undecidable"]
    if undecidable:
        c = undecidable[0]
        lines.append(
            f"undecidable: {c.n_base}/{c.n_cand} post-warm-up steps; a two-sided Mann-Whitney test needs "
            f"at least {c.needed_per_side} per side to reach p < 0.05, so no verdict either way; "
            f"rerun both with --steps of warm-up + {c.needed_per_side} or more"
        )
    return "\n".join(lines)
