# shellcheck shell=bash
# scripts/gpu_common.sh — sourced by scripts/gpu_study.sh and scripts/gpu_profile.sh: the
# GPU machine's packages, Snakemake run (or, in a rehearsal, its plan checked), the deadline
# of one command, what goes into $OUT and the summary printed last.
#
# The GPU machine runs one command for at most 10 minutes and sends back only what is under
# $OUT (at most 8 files of 16 MiB, two folders deep). So Snakemake is stopped
# GPU_RESERVE_SECONDS (60) before GPU_COMMAND_SECONDS (600) have passed since the script
# started, and what it has made is packed into $OUT then: rerunning the same command goes on
# where it stopped (Snakemake's outputs are kept, and results/ is never wiped).
#
# Environment: PYTHON (python3), OUT (none: nothing packed; a rehearsal uses a temporary
# folder), SITE (/tmp/site), GPU_COMMAND_SECONDS, GPU_RESERVE_SECONDS.

gpu_init() {  # gpu_init NAME "$@": the options, the clock, the console log
    NAME=$1
    shift
    REHEARSE=0
    for arg in "$@"; do
        case $arg in
            --rehearse) REHEARSE=1 ;;
            -h | --help) sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
            *) echo "unknown option: $arg (use --rehearse or nothing)" >&2; exit 2 ;;
        esac
    done
    STARTED=$(date +%s)
    PYTHON=$(command -v "${PYTHON:-python3}") || { echo "no ${PYTHON:-python3} here" >&2; exit 2; }
    PYTHON=$(cd "$(dirname "$PYTHON")" && pwd)/$(basename "$PYTHON")  # absolute, links kept
    CONFIG=(--configfile config/config.yaml config/presets/gpu_study.yaml)
    DEADLINE=$((STARTED + ${GPU_COMMAND_SECONDS:-600} - ${GPU_RESERVE_SECONDS:-60}))
    RC=0      # the script's exit status: the first step that failed
    SMK_RC=0  # the last Snakemake run's
    STEPS=""
    if [[ -z ${OUT:-} && $REHEARSE == 1 ]]; then
        OUT=$(mktemp -d "${TMPDIR:-/tmp}/attnio-out.XXXXXX")
        echo "rehearsal: \$OUT is $OUT"
    fi
    if [[ -n ${OUT:-} ]]; then
        mkdir -p "$OUT"
        OUT=$(cd "$OUT" && pwd)
        CONSOLE=$OUT/$NAME-console.log
    else
        CONSOLE=${TMPDIR:-/tmp}/attnio-$NAME-console.log
    fi
    : > "$CONSOLE"
    exec > >(tee -a "$CONSOLE") 2>&1
    TEE=$!
    # the rules run `python`: make it this Python whatever the machine calls it
    SHIMS=$(mktemp -d "${TMPDIR:-/tmp}/attnio-bin.XXXXXX")
    printf '#!/bin/sh\nexec "%s" "$@"\n' "$PYTHON" > "$SHIMS/python"
    chmod +x "$SHIMS/python"
    PATH="$SHIMS:$(dirname "$PYTHON"):$PATH"
    export PATH
    unset ATTNIO_INTERPRET TRITON_INTERPRET
    trap gpu_finish EXIT
}

log() { printf '\n== %s (%s s)\n' "$*" "$(($(date +%s) - STARTED))"; }

step() {  # step NAME COMMAND...: run it, note its seconds for the summary
    local name=$1 began rc=0
    shift
    began=$(date +%s)
    log "$name"
    "$@" || rc=$?
    STEPS+="${STEPS:+,}$name=$(($(date +%s) - began))"
    return "$rc"
}

install_packages() {  # what the rules need beyond the image, from .whl/, into $SITE
    if ! compgen -G ".whl/*.whl" > /dev/null; then
        echo "no .whl/ here: using the packages this Python has"
        export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
        return 0
    fi
    SITE=${SITE:-/tmp/site}
    local want stamp=$SITE/.attnio-wheels
    want=$(cd .whl && ls -- *.whl requirements.txt 2> /dev/null | sort | sha256sum | cut -c1-16)
    if [[ -f $stamp && $(cat "$stamp") == "$want" ]]; then
        echo "the wheels of .whl/ are installed in $SITE already"
    else
        local pip=("$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir
            --disable-pip-version-check --target "$SITE")
        # the pinned versions only: an older wheel left in .whl/ is not installed beside them
        if [[ -f .whl/requirements.txt ]] && "${pip[@]}" --find-links .whl -r .whl/requirements.txt; then
            echo "installed the $(grep -cE '^[A-Za-z0-9]' .whl/requirements.txt) pinned wheels of .whl/requirements.txt into $SITE"
        else
            "${pip[@]}" .whl/*.whl
            echo "installed $(ls .whl/*.whl | wc -l) wheels of .whl/ into $SITE"
        fi
        echo "$want" > "$stamp"
    fi
    export PYTHONPATH="$PWD:$SITE${PYTHONPATH:+:$PYTHONPATH}" JUPYTER_PATH="$SITE/share/jupyter"
    export PATH="$SHIMS:$SITE/bin:$PATH"
}

check_stack() {  # the versions; on the real run, a CUDA GPU is required
    "$PYTHON" -c "import snakemake, papermill, nbconvert, torch, triton; print('python', __import__('sys').version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__, 'snakemake', snakemake.__version__, 'cuda', torch.cuda.is_available())"
    if [[ $REHEARSE == 0 ]]; then
        "$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA GPU here: run with --rehearse')"
    fi
    "$PYTHON" workflow/scripts/unlock_if_stale.py .
}

smk() {  # smk TARGET... : Snakemake with the study's config, --keep-going, until the deadline;
    #          in a rehearsal the same command as a dry run, each of its jobs' commands checked
    local command=("$PYTHON" -m snakemake "$@" --cores all --keep-going "${CONFIG[@]}")
    if [[ $REHEARSE == 1 ]]; then
        local plan
        plan=$(mktemp "${TMPDIR:-/tmp}/attnio-plan.XXXXXX")
        echo "plan: ${command[*]} --dry-run --printshellcmds"
        "${command[@]}" --dry-run --printshellcmds > "$plan" 2>&1 || { tail -20 "$plan"; SMK_RC=1; return 1; }
        sed -n '/^Job stats:/,/^total/{p;/^total/q}' "$plan"
        SMK_RC=0
        "$PYTHON" scripts/rehearse.py "$plan" || SMK_RC=$?
        rm -f "$plan"
        return "$SMK_RC"
    fi
    local left=$((DEADLINE - $(date +%s)))
    if ((left < 30)); then
        echo "no time left before the deadline for: ${command[*]}"
        return 124
    fi
    echo "running: ${command[*]} (stopped after ${left} s)"
    SMK_RC=0
    timeout --signal=TERM --kill-after=20 "$left" "${command[@]}" || SMK_RC=$?
    return "$SMK_RC"
}

gpu_finish() {  # on exit, whatever happened: $OUT packed, the summary written and printed last
    local rc=$?
    set +e
    ((RC == 0)) && RC=$rc
    local elapsed=$(($(date +%s) - STARTED))
    if [[ -n ${OUT:-} ]]; then
        log "packing \$OUT"
        local others=2  # the console log and the summary
        if [[ $NAME == profile ]]; then
            for report in results/profile/ncu/*.ncu-rep; do
                [[ -f $report ]] && cp "$report" "$OUT/" && others=$((others + 1))
            done
        fi
        "$PYTHON" scripts/gpu_out.py pack results "$OUT" "$NAME" --other "$others"
    fi
    log "summary"
    local args=(results ${OUT:+"$OUT"} "$NAME" --elapsed "$elapsed" --steps "$STEPS" --rc "$SMK_RC" --console "$CONSOLE")
    [[ $REHEARSE == 1 ]] && args+=(--rehearse)
    if [[ -n ${OUT:-} ]]; then
        "$PYTHON" scripts/gpu_out.py summary "${args[@]}" > /dev/null
        "$PYTHON" scripts/gpu_out.py check-out "$OUT" || { ((RC == 0)) && RC=1; }
        ls -l "$OUT" | tail -n +2
        echo
        cat "$OUT/$NAME-summary.txt"
    else
        "$PYTHON" scripts/gpu_out.py summary "${args[@]}"
    fi
    rm -rf "$SHIMS"
    exec 1>&- 2>&-  # the console log complete before the command ends
    wait "$TEE" 2> /dev/null
    exit "$RC"
}
