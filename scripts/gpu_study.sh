#!/usr/bin/env bash
# scripts/gpu_study.sh — the GPU study on one GPU machine without internet, one command well
# under its 10 minutes, from the project root (then scripts/gpu_profile.sh):
#   OUT=/some/folder scripts/gpu_study.sh     on the GPU machine
#   scripts/gpu_study.sh --rehearse           anywhere: every command checked, no GPU work
#
# 1. packages: what the rules need beyond the image, from .whl/ (scripts/gpu_wheels.sh, run
#    beforehand on a machine with internet) into /tmp/site; torch and triton stay the image's.
# 2. preflight (snakemake preflight): every launch of the plan compiled for this GPU and held
#    against its limits; what cannot run is printed, and the study goes on (validation leaves
#    those cases out, naming why).
# 3. estimate (snakemake budget): the study's duration on this machine; stops when it exceeds
#    GPU_STUDY_SECONDS (default 480); goes on when no estimate could be made.
# 4. the study: snakemake with config/config.yaml + config/presets/gpu_study.yaml (build,
#    validate, ceilings, every point, tables, reports), --keep-going, stopped before the
#    command's deadline; rerun the same command to go on where it stopped.
# 5. with $OUT set: results/ packed there (study-results.tar.gz, build artifacts left out), the
#    console log, and study-summary.txt (points ok/skipped/failed, the headline, seconds taken
#    against the estimate), printed last.
# --rehearse (no GPU needed): steps 2 and 4 as Snakemake dry runs with the same arguments,
# every job's command checked by scripts/rehearse.py through the parsers the real run uses;
# step 3 for real as well (it needs no GPU: an H200's estimate from this machine's start-ups
# and compiles; GPU_REHEARSE_BUDGET=0 checks its plan only); $OUT packed into a temporary
# folder unless OUT is set.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/gpu_common.sh
source scripts/gpu_common.sh
gpu_init study "$@"
LIMIT=${GPU_STUDY_SECONDS:-480}

step packages install_packages
check_stack

step preflight smk preflight || echo "preflight failed (exit $SMK_RC): going on; validation finds what cannot run"
[[ $REHEARSE == 1 ]] || "$PYTHON" scripts/gpu_out.py preflight results

# shellcheck disable=SC2317  # called through step
estimate() {  # the budget rule (in a rehearsal its plan checked, then run: it needs no GPU)
    if [[ $REHEARSE == 1 ]]; then
        smk budget || return
        if [[ ${GPU_REHEARSE_BUDGET:-1} == 0 ]]; then
            echo "GPU_REHEARSE_BUDGET=0: the estimate's plan checked, the estimate not made"
            return 0
        fi
        REHEARSE=0 smk budget || return
        "$PYTHON" scripts/gpu_out.py estimate results "$LIMIT" --rehearse
    else
        # without an estimate the study still runs: the deadline stops it in time to pack
        smk budget || echo "the estimate failed (exit $SMK_RC): going on without one"
        "$PYTHON" scripts/gpu_out.py estimate results "$LIMIT"
    fi
}
step estimate estimate || RC=$?
((RC == 0)) || exit "$RC"

step study smk || RC=$?
exit "$RC"
