#!/usr/bin/env bash
# scripts/gpu_wheels.sh [DIR]      the wheels into DIR (default: the project's .whl/)
# scripts/gpu_wheels.sh --resolve  the pinned set printed only; nothing downloaded or written
#
# On a machine with internet: the wheels the GPU study needs on an offline GPU machine, for
# that machine's Python (GPU_PYTHON, default 3.12; x86_64 Linux, manylinux glibc >= 2.28).
# Shipped: what the rules need beyond the GPU image (snakemake and its SLURM executor plugin,
# papermill, nbconvert, nbclient, nbformat, ipykernel and what they require). Never shipped:
# torch, triton and the image's scientific stack (IMAGE lists them), which the GPU machine
# keeps as they are.
#
# Versions are those tested here: the pins of pyproject.toml's `pipeline` extra (snakemake,
# the SLURM plugin) and, for the other roots and everything they require, the versions
# installed in the tested environment (TESTED_PYTHON, default .venv/bin/python; set it empty
# to resolve the newest releases instead, within pyproject's bounds).
#
# DIR is rebuilt clean: the wheels go into a fresh folder beside it, are checked (exactly one
# wheel per pin, no other file), and that folder then replaces DIR, so `pip install DIR/*.whl`
# never sees two versions of one package. Wheels DIR already holds for the same target and the
# same pins are reused instead of downloaded again. DIR must hold only wheels and
# requirements.txt (the pinned set, written there too), else the script refuses to replace it.
# uv (resolution) and pip (downloads) run from a helper environment kept in GPU_WHEELS_HELPER
# (default ~/.cache/attnio/gpu-wheels-venv).
set -euo pipefail

RESOLVE=0
[[ ${1:-} == --resolve ]] && { RESOLVE=1; shift; }
DIR=${1:-}
PY=${GPU_PYTHON:-3.12}  # or with its patch level (3.12.3): some releases require one
ABI=cp$(cut -d. -f1,2 <<< "$PY" | tr -d .)
PLATFORM=x86_64-manylinux_2_28
# Names (their versions come from pyproject.toml and the tested environment) or requirements.
ROOTS=${ROOTS:-"snakemake snakemake-executor-plugin-slurm papermill nbconvert nbclient nbformat ipykernel"}
IMAGE=${IMAGE:-"torch triton numpy pandas pyarrow matplotlib seaborn scipy pytest pytest-xdist pyyaml jinja2 markupsafe requests packaging pillow"}
TESTED=${TESTED_PYTHON-.venv/bin/python}
HELPER=${GPU_WHEELS_HELPER:-${XDG_CACHE_HOME:-$HOME/.cache}/attnio/gpu-wheels-venv}
TARGET="# for CPython $PY, $PLATFORM"
log() { printf '%s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# paths given relative to where it was started; then from the project root
[[ -z $DIR ]] || DIR=$(realpath -ms -- "$DIR")
[[ ${TESTED_PYTHON:-} != */* ]] || TESTED=$(realpath -ms -- "$TESTED_PYTHON")  # (links kept: a venv's)
cd "$(dirname "${BASH_SOURCE[0]}")/.."
DIR=${DIR:-$PWD/.whl}
if [[ -n $TESTED && ! -x $TESTED ]]; then
    log "note: no tested environment at $TESTED: resolving the newest releases within pyproject's bounds"
    TESTED=
fi
if [[ $RESOLVE == 0 && -e $DIR ]]; then
    [[ -d $DIR ]] || die "$DIR is not a folder"
    other=$(find "$DIR" -mindepth 1 -maxdepth 1 ! -name '*.whl' ! -name requirements.txt -printf '%f ' | head -c 300)
    [[ -z $other ]] || die "$DIR holds more than wheels and requirements.txt (${other% }): not replacing it"
fi

WORK=$(mktemp -d)
NEW=
OLD=
MADE=
cleanup() { rm -rf "$WORK" ${NEW:+"$NEW"} ${OLD:+"$OLD"} ${MADE:+"$MADE"}; }
trap cleanup EXIT

# ---- the roots, pinned to the versions tested here, and the tested set as constraints -------
# Read with the tested environment's Python (it knows its own versions; tomllib from 3.11,
# else the tomli that pip vendors).
ROOTS=$ROOTS "${TESTED:-python3}" - "$WORK/roots.in" "$WORK/constraints.txt" "${TESTED:+1}" <<'PY'
import importlib.metadata as metadata
import os
import re
import sys

try:
    import tomllib
except ModuleNotFoundError:
    from pip._vendor import tomli as tomllib

roots_out, constraints_out, use_tested = sys.argv[1], sys.argv[2], sys.argv[3] == "1"


def norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()


with open("pyproject.toml", "rb") as f:
    pipeline = tomllib.load(f)["project"]["optional-dependencies"]["pipeline"]
declared = {norm(re.match(r"[A-Za-z0-9._-]+", r)[0]): r for r in pipeline}
tested = {}
if use_tested:
    for dist in metadata.distributions():
        name, version = norm(dist.metadata["Name"]), dist.version
        if name != "attnio" and "+" not in version:  # not the project, not a local build (torch+cpu)
            tested[name] = version
roots = []
for root in os.environ["ROOTS"].split():
    name = norm(re.match(r"[A-Za-z0-9._-]+", root)[0])
    spec = declared.get(name, "")
    if root != re.match(r"[A-Za-z0-9._-]+", root)[0]:
        roots.append(root)  # a requirement given in ROOTS: as it is
    elif "==" in spec:
        if name in tested and f"=={tested[name]}" not in spec.replace(" ", ""):
            print(f"note: {name} {tested[name]} is installed here, pyproject.toml pins {spec}", file=sys.stderr)
        roots.append(spec)
    elif name in tested:
        roots.append(f"{name}=={tested[name]}")
    else:
        roots.append(spec or name)
named = {norm(re.match(r"[A-Za-z0-9._-]+", r)[0]) for r in roots}
with open(roots_out, "w") as f:
    f.write("".join(f"{r}\n" for r in roots))
with open(constraints_out, "w") as f:
    f.write("".join(f"{n}=={v}\n" for n, v in sorted(tested.items()) if n not in named))
print(f"roots: {' '.join(roots)}", file=sys.stderr)
if use_tested:
    print(f"their requirements constrained to the {len(tested)} versions installed here", file=sys.stderr)
PY

# the tools: uv and pip in a helper environment, kept between runs (made aside, then moved in)
helper_ok() { [[ -x $HELPER/bin/uv ]] && "$HELPER/bin/python" -c 'import pip' 2> /dev/null; }
if ! helper_ok; then
    mkdir -p "$(dirname "$HELPER")"
    MADE=$(mktemp -d "$HELPER.new.XXXXXX")
    python3 -m venv "$MADE"
    "$MADE/bin/python" -m pip install -q --disable-pip-version-check uv
    if ! helper_ok; then  # (else another run made it meanwhile)
        rm -rf "$HELPER"
        mv -T "$MADE" "$HELPER" || helper_ok || die "no helper environment in $HELPER"
    fi
fi
omit=()
for name in $IMAGE; do omit+=(--no-emit-package "$name"); done
(cd "$WORK" && "$HELPER/bin/uv" pip compile -q --no-header --python-version "$PY" --python-platform "$PLATFORM" \
    "${omit[@]}" -c constraints.txt roots.in -o resolved.txt)
{
    echo "$TARGET"
    echo "# scripts/gpu_wheels.sh; roots: $(tr '\n' ' ' < "$WORK/roots.in")"
    cat "$WORK/resolved.txt"
} > "$WORK/requirements.txt"
# the pins, "name==version", name and version normalized
pins=$(grep -E '^[A-Za-z0-9]' "$WORK/resolved.txt" | sed 's/ *#.*//' | "$HELPER/bin/python" -c '
import sys
from pip._vendor.packaging.requirements import Requirement
from pip._vendor.packaging.utils import canonicalize_name
from pip._vendor.packaging.version import Version
for line in sys.stdin:
    r = Requirement(line)
    (spec,) = r.specifier
    assert spec.operator == "==", line
    print(f"{canonicalize_name(r.name)}=={Version(spec.version)}")')
if [[ $RESOLVE == 1 ]]; then
    cat "$WORK/requirements.txt"
    exit 0
fi

# ---- the wheels, into a fresh folder beside DIR --------------------------------------------
mkdir -p "$(dirname "$DIR")"
NEW=$(mktemp -d "$DIR.new.XXXXXX")
chmod u=rwx,go=rx "$NEW"  # as a folder made by mkdir (mktemp's is private)
# "name==version PATH" for each wheel file, name and version normalized as the pins are
keys() {
    "$HELPER/bin/python" - "$@" <<'PY'
import sys
from pip._vendor.packaging.utils import parse_wheel_filename
for path in sys.argv[1:]:
    name, version, _, _ = parse_wheel_filename(path.rsplit("/", 1)[-1])
    print(f"{name}=={version} {path}")
PY
}
declare -A WANT=()
for pin in $pins; do WANT[$pin]=1; done
shopt -s nullglob
reused=0
if [[ -f $DIR/requirements.txt ]] && [[ $(head -1 "$DIR/requirements.txt") == "$TARGET" ]]; then
    old=("$DIR"/*.whl)
    if (( ${#old[@]} )); then
        while read -r pin path; do
            if [[ -n ${WANT[$pin]:-} ]]; then cp -p -- "$path" "$NEW/"; unset "WANT[$pin]"; reused=$((reused + 1)); fi
        done < <(keys "${old[@]}")
    fi
fi
if (( ${#WANT[@]} )); then
    printf '%s\n' "${!WANT[@]}" > "$WORK/missing.txt"
    tags=(--python-version "$PY" --implementation cp --abi "$ABI")
    for glibc in 28 27 26 25 24 23 22 21 20 19 18 17; do tags+=(--platform "manylinux_2_${glibc}_x86_64"); done
    tags+=(--platform manylinux2014_x86_64 --platform manylinux2010_x86_64 --platform manylinux1_x86_64)
    # one pip for all: a wheel for the target where there is one, else the source distribution
    "$HELPER/bin/python" -m pip download -q --disable-pip-version-check --no-deps "${tags[@]}" \
        -d "$WORK/dl" -r "$WORK/missing.txt"
    for sdist in "$WORK"/dl/*.tar.gz "$WORK"/dl/*.zip; do
        # no wheel for the target: build one, which must be pure Python to run there
        "$HELPER/bin/python" -m pip wheel -q --disable-pip-version-check --no-deps -w "$WORK/built" "$sdist"
        for wheel in "$WORK"/built/*.whl; do
            [[ $wheel == *-none-any.whl ]] || die "${sdist##*/} built ${wheel##*/}, not pure Python"
            mv -- "$wheel" "$WORK/dl/"
        done
        rm -f -- "$sdist"
    done
    mv -- "$WORK"/dl/*.whl "$NEW/"
fi
cp "$WORK/requirements.txt" "$NEW/requirements.txt"

# ---- check: exactly one wheel per pin, nothing else -----------------------------------------
wheels=("$NEW"/*.whl)
(( ${#wheels[@]} )) || die "no wheels"
keys "${wheels[@]}" | cut -d' ' -f1 | sort > "$WORK/have.txt"
"$HELPER/bin/python" - "$WORK/have.txt" "$pins" <<'PY'
import collections
import sys

have = open(sys.argv[1]).read().split()
want = set(sys.argv[2].split())
names = collections.Counter(h.split("==")[0] for h in have)
problems = [f"two wheels of {n}" for n, c in names.items() if c > 1]
problems += [f"no wheel for {p}" for p in sorted(want - set(have))]
problems += [f"not pinned: {h}" for h in sorted(set(have) - want)]
if problems:
    sys.exit("error: " + "; ".join(problems))
PY
others=$(find "$NEW" -mindepth 1 -maxdepth 1 ! -name '*.whl' ! -name requirements.txt -printf '%f ')
[[ -z $others ]] || die "unexpected files: $others"

# ---- swap it in ---------------------------------------------------------------------------
if [[ -e $DIR ]]; then
    OLD=$(mktemp -u "$DIR.old.XXXXXX")
    mv -- "$DIR" "$OLD"
fi
mv -- "$NEW" "$DIR"
NEW=
echo "$(echo "$pins" | wc -w) packages, ${#wheels[@]} wheels ($reused reused), $(du -sh "$DIR" | cut -f1) in $DIR (for CPython $PY)"
