#!/usr/bin/env bash
# One prepared GPU check (issue 22): on a bare GPU machine with no network, install the carried
# wheels, run TRL through rlbench on CUDA (the tiny workload and a random model of Qwen2.5-0.5B's
# shape, NVML telemetry at the default rate), probe the GPU, compare step times with and without
# the sampler, measure the overhead terms (benchmarks/measure_gpu_overheads.py: kernel launch, layer unit,
# the FSDP trainer's unit), and leave records, probe, overheads and a pass/fail summary in one folder (6 files).
#
#   .nox/tests/bin/python benchmarks/gpu_wheels.py --dest .gpu-wheels     # here, with network
#   bash benchmarks/gpu_check.sh .gpu-wheels "$OUT"                        # there, about 6 minutes
#   python benchmarks/gpu_check_results.py publish "$OUT"                  # here, afterwards
#
# Output: gpu_check.log, environment.txt, gpu_probe.json, gpu_overheads.json, records.tar.gz, summary.json.
# Settings: GPU_CHECK_STEPS (6), GPU_CHECK_SAMPLER_REPEATS (2), GPU_CHECK_SAMPLER_STEPS (8),
# GPU_CHECK_BUDGET_S (450: optional sampler runs are skipped past it, so the folder is always packed),
# PYTHON (python3), GPU_CHECK_COMMIT (the commit of the tree sent, where it travelled without .git).
# A rehearsal of the flow on a CPU (its GPU checks then fail): GPU_CHECK_ALLOW_CPU=1,
# GPU_CHECK_BIG_WORKLOAD=gsm8k-grpo-tiny, wheels from `gpu_wheels.py --python-version` of that Python.
set -uo pipefail

WHEELS=${1:?usage: bash benchmarks/gpu_check.sh WHEEL_DIR OUT_DIR}
OUT=${2:?usage: bash benchmarks/gpu_check.sh WHEEL_DIR OUT_DIR}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-python3}
STEPS=${GPU_CHECK_STEPS:-6}
SAMPLER_REPEATS=${GPU_CHECK_SAMPLER_REPEATS:-2}
SAMPLER_STEPS=${GPU_CHECK_SAMPLER_STEPS:-8}
BIG_WORKLOAD=${GPU_CHECK_BIG_WORKLOAD:-gsm8k-grpo-qwen05b-random}
BUDGET_S=${GPU_CHECK_BUDGET_S:-450}
SITE=/tmp/rlbench-gpu-check-site
WORK=$(mktemp -d /tmp/rlbench-gpu-check.XXXXXX)
START=$SECONDS
REHEARSAL=
COMMIT=${GPU_CHECK_COMMIT:-$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)}

mkdir -p "$OUT" || exit 2
exec > >(tee -a "$OUT/gpu_check.log") 2>&1
echo "gpu_check: start $(date -u +%FT%TZ), tree $ROOT (commit $COMMIT), wheels $WHEELS, work $WORK"

step() { echo "== $* ($((SECONDS - START)) s)"; }

step "preflight"
if ! "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    if [ "${GPU_CHECK_ALLOW_CPU:-0}" != 1 ]; then
        echo "error: no CUDA device visible to $PY's torch; run this check on the GPU machine"
        exit 2
    fi
    echo "rehearsal on a CPU (GPU_CHECK_ALLOW_CPU=1): the GPU checks will fail"
    REHEARSAL=1
fi
ls "$WHEELS"/*.whl >/dev/null 2>&1 \
    || { echo "error: no wheels in $WHEELS; run benchmarks/gpu_wheels.py first"; exit 2; }
while IFS= read -r pin; do  # the folder must hold the committed set, no older one
    case $pin in ''|'#'*) continue ;; esac
    stem=${pin%%==*}
    ls "$WHEELS/${stem//-/_}-${pin#*==}-"*.whl >/dev/null 2>&1 \
        || { echo "error: $WHEELS lacks $pin (benchmarks/gpu_wheels.txt); run benchmarks/gpu_wheels.py again"; exit 2; }
done <"$ROOT/benchmarks/gpu_wheels.txt"

step "install carried wheels and rlbench (offline)"
rm -rf "$SITE"
"$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
    "$WHEELS"/*.whl || { echo "error: installing the carried wheels failed"; exit 2; }
# rlbench itself from the tree that travelled (setuptools from the image: no build isolation, no index);
# where the image's setuptools cannot build it, the package laid out by hand as pyproject maps it
if ! "$PY" -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --no-cache-dir --upgrade \
        --target "$SITE" "$ROOT"; then
    echo "warning: building rlbench from $ROOT failed; copying its folders into $SITE/rlbench instead"
    rm -rf "$SITE/rlbench" && mkdir -p "$SITE/rlbench" || exit 2
    for sub in harness adapters workloads reports; do cp -r "$ROOT/$sub" "$SITE/rlbench/$sub" || exit 2; done
fi
export PYTHONPATH=$SITE${PYTHONPATH:+:$PYTHONPATH}
export RLBENCH_CACHE=$WORK/cache HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
unset RLBENCH_SAMPLE_HZ  # the default rate, except where the sampler comparison turns it off

{
    echo "# nvidia-smi"; nvidia-smi 2>&1
    echo "# python"; "$PY" -VV
    echo "# pip check (image + carried wheels)"; "$PY" -m pip check 2>&1
    echo "# pip list"; "$PY" -m pip list 2>/dev/null
} >"$OUT/environment.txt"
MODULES="rlbench.harness, trl, datasets, math_verify, ruptures"
# NVML's binding comes with the image (nvidia-ml-py): without it the sampler would read the host only
[ -z "$REHEARSAL" ] && MODULES="$MODULES, pynvml"
"$PY" -c "import $MODULES; print('imports ok: trl', trl.__version__, 'from', trl.__file__)" \
    || { echo "error: a carried package does not import (see environment.txt's pip check)"; exit 2; }
"$PY" -m rlbench.harness ls

# run ROLE WORKLOAD STEPS [RATE_HZ]: one record under $WORK/records/ROLE; RATE_HZ 0 turns the sampler off
run() {
    local role=$1 workload=$2 steps=$3 rate=${4:-}
    step "run $role: $workload, $steps steps${rate:+, sampler ${rate} Hz}"
    mkdir -p "$WORK/records/$role"
    env ${rate:+RLBENCH_SAMPLE_HZ=$rate} RLBENCH_RUN_TIMEOUT_S=${RUN_TIMEOUT_S:-300} \
        "$PY" -m rlbench.harness run --framework trl --workload "$workload" --steps "$steps" --out "$WORK/records/$role" \
        || echo "warning: run $role exited $?"
}

run tiny gsm8k-grpo-tiny "$STEPS"
run qwen05b "$BIG_WORKLOAD" "$STEPS"

step "GPU probe"
"$PY" -m rlbench.harness.predict.gpu_probe --out "$OUT/gpu_probe.json" >/dev/null || echo "warning: GPU probe exited $?"
"$PY" "$ROOT/benchmarks/measure_gpu_overheads.py" --out "$OUT/gpu_overheads.json" >/dev/null \
    || echo "warning: overhead measurement exited $?"

# Sampler overhead: the tiny workload alternately without and with the sampler, in the same window.
for i in $(seq 1 "$SAMPLER_REPEATS"); do
    if [ $((SECONDS - START)) -gt "$BUDGET_S" ]; then
        echo "budget of $BUDGET_S s spent: sampler repeat $i skipped"
        break
    fi
    run sampler-off gsm8k-grpo-tiny "$SAMPLER_STEPS" 0
    run sampler-on gsm8k-grpo-tiny "$SAMPLER_STEPS"
done

step "summary and packing"
"$PY" "$ROOT/benchmarks/gpu_check_results.py" summarize "$WORK/records" --probe "$OUT/gpu_probe.json" \
    --commit "$COMMIT" --out "$OUT/summary.json" || echo "warning: summary exited $?"
tar -czf "$OUT/records.tar.gz" -C "$WORK" --exclude=trl_output records
if [ "$(stat -c %s "$OUT/records.tar.gz")" -gt $((15 * 1024 * 1024)) ]; then  # 16 MiB per returned file
    echo "records over 15 MiB: packed again without framework.log and prompts.jsonl"
    tar -czf "$OUT/records.tar.gz" -C "$WORK" --exclude=trl_output --exclude=framework.log \
        --exclude=prompts.jsonl records
fi
ls -l "$OUT"
step "done"
