#!/usr/bin/env bash
# scripts/gpu_study.sh — the GPU study on one GPU machine without internet, in one command,
# from the project root:
#   scripts/gpu_study.sh              on the GPU machine
#   scripts/gpu_study.sh --rehearse   anywhere: everything but the GPU work
#
# 1. Installs what the rules need from .whl/ (made beforehand, on a machine with internet, by
#    scripts/gpu_wheels.sh for the GPU machine's Python) into /tmp/site; torch, triton and
#    the image's scientific packages stay as they are.
# 2. Estimates the study's duration on this machine (rule budget: the plan's jobs costed from
#    the model, a job start-up and a kernel compile measured here) and stops when it exceeds
#    GPU_STUDY_SECONDS (default 480).
# 3. Runs the study: config/presets/gpu_study.yaml (build, validate, ceilings, every point
#    timed, tables, reports).
# 4. Runs the tests marked gpu, and Nsight Compute on the two headline points with its
#    reports kept.
# 5. Copies tables, records, logs and rendered reports to docs/results/<gpu>/ (to commit)
#    and prints the headline numbers.
# --rehearse (no GPU needed): steps 1 and 2 (for an H200), a dry run of step 3, step 4's
# tests (skipped, saying why), and the headline script on the development results.
set -euo pipefail

REHEARSE=0
[[ ${1:-} == --rehearse ]] && REHEARSE=1
LIMIT=${GPU_STUDY_SECONDS:-480}
PYTHON=${PYTHON:-python3}
CONFIG=(--configfile config/config.yaml config/presets/gpu_study.yaml)
log() { printf '\n== %s\n' "$*"; }

log "1. packages"
if compgen -G ".whl/*.whl" > /dev/null; then
    SITE=${SITE:-/tmp/site}
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" .whl/*.whl
    export PYTHONPATH="$PWD:$SITE${PYTHONPATH:+:$PYTHONPATH}" JUPYTER_PATH="$SITE/share/jupyter" PATH="$SITE/bin:$PATH"
else
    echo "no .whl/ here: using the packages this Python has"
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
"$PYTHON" -c "import snakemake, papermill, nbconvert, torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.cuda.is_available())"
SNAKEMAKE=("$PYTHON" -m snakemake --cores all)
if [[ $REHEARSE == 0 ]]; then
    "$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA GPU here: run with --rehearse')"
fi

log "2. estimate (limit ${LIMIT} s)"
"${SNAKEMAKE[@]}" budget --forcerun budget "${CONFIG[@]}"
"$PYTHON" - "$LIMIT" <<'PY'
import json, sys
found = json.load(open("results/budget.json"))
limit = float(sys.argv[1])
print(f"{found['points']} points on {found['gpu']}: build {found['build_s']:.0f} s, validate "
      f"{found['validate_s']:.0f} s, measure {found['measure_s']:.0f} s; total {found['total_s']:.0f} s "
      f"(start-up {found['startup_s']:.1f} s, compile {found['compile_s']:.2f} s per variant, measured here)")
sys.exit(0 if found["total_s"] <= limit else f"estimated {found['total_s']:.0f} s > {limit:.0f} s: shrink config/presets/gpu_study.yaml")
PY

log "3. the study"
STARTED=$(date +%s)
if [[ $REHEARSE == 1 ]]; then
    "${SNAKEMAKE[@]}" --dry-run --quiet rules "${CONFIG[@]}"
else
    "${SNAKEMAKE[@]}" "${CONFIG[@]}"
fi
echo "study: $(( $(date +%s) - STARTED )) s (estimated $("$PYTHON" -c 'import json; print(round(json.load(open("results/budget.json"))["total_s"]))') s)"

log "4. gpu tests and Nsight Compute"
"$PYTHON" -m pytest -q -m gpu tests/test_gpu.py -p no:cacheprovider -rs || echo "gpu tests failed (see above)"
GPU=$("$PYTHON" -c "import torch; print(torch.cuda.get_device_name().replace('NVIDIA ', '').replace(' ', '-') if torch.cuda.is_available() else 'rehearsal')")
OUT=docs/results/$GPU
if [[ $REHEARSE == 0 ]] && command -v ncu > /dev/null; then
    mkdir -p "$OUT/ncu"
    for point in triton_naive/bfloat16/B2-H16-T8192-d128-full-bm128-bn64-normal \
                 triton_flash/bfloat16/B2-H16-T8192-d128-full-bm128-bn64-normal; do
        args=$("$PYTHON" -c "import sys; from kernels.study.point import Point; print(' '.join(Point.from_name(sys.argv[1]).cli_args()))" "$point")
        # shellcheck disable=SC2086
        ncu --clock-control none --profile-from-start off --export "$OUT/ncu/${point%%/*}" --force-overwrite \
            --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,gpu__time_duration.sum \
            "$PYTHON" -m kernels ncu-target $args --device cuda > "$OUT/ncu/${point%%/*}.txt"
    done
fi

log "5. results"
if [[ $REHEARSE == 0 ]]; then
    mkdir -p "$OUT"
    cp -r results/packed/index/. "$OUT/"
    cp results/budget.json "$OUT/"
fi
"$PYTHON" -m reports.headline results
