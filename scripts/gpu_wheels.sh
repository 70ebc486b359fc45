#!/usr/bin/env bash
# scripts/gpu_wheels.sh [DIR] — on a machine with internet, from the project root: the wheels
# the GPU study needs on an offline GPU machine, for that machine's Python (GPU_PYTHON,
# default 3.12; x86_64 Linux). Shipped: what the rules need beyond the GPU image (snakemake,
# papermill, nbconvert, ipykernel and what they require). Never shipped: torch, triton and
# the image's scientific stack (IMAGE lists them), which the GPU machine keeps as they are.
# Pinned versions go to DIR/requirements.txt; wheels already in DIR are kept.
set -euo pipefail

DIR=${1:-.whl}
PY=${GPU_PYTHON:-3.12}
ROOTS=${ROOTS:-"snakemake>=9,<10 papermill nbconvert nbclient nbformat ipykernel"}
IMAGE=${IMAGE:-"torch triton numpy pandas pyarrow matplotlib seaborn scipy pytest pytest-xdist pyyaml jinja2 markupsafe requests packaging pillow"}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$DIR"

python3 -m venv "$WORK/venv"
"$WORK/venv/bin/pip" install -q --disable-pip-version-check uv
omit=()
for name in $IMAGE; do omit+=(--no-emit-package "$name"); done
tr ' ' '\n' <<< "$ROOTS" > "$WORK/roots.in"
"$WORK/venv/bin/uv" pip compile -q --no-header --python-version "$PY" \
    --python-platform x86_64-manylinux_2_28 "${omit[@]}" "$WORK/roots.in" -o "$DIR/requirements.txt"

tags=(--only-binary=:all: --python-version "$PY" --implementation cp --abi "cp${PY/./}")
for glibc in 28 27 26 25 24 23 22 21 20 19 18 17; do tags+=(--platform "manylinux_2_${glibc}_x86_64"); done
tags+=(--platform manylinux2014_x86_64 --platform manylinux2010_x86_64 --platform manylinux1_x86_64)
pins=$(grep -E '^[A-Za-z0-9]' "$DIR/requirements.txt" | sed 's/ *#.*//')
for pin in $pins; do
    if ! "$WORK/venv/bin/pip" download -q --disable-pip-version-check --no-deps "${tags[@]}" -d "$DIR" "$pin" 2> /dev/null; then
        # no wheel for the target: build one, which must be pure Python to run there
        "$WORK/venv/bin/pip" wheel -q --disable-pip-version-check --no-deps -w "$WORK/built" "$pin"
        for wheel in "$WORK"/built/*.whl; do
            [[ $wheel == *-none-any.whl ]] || { echo "error: $pin built ${wheel##*/}, not pure Python" >&2; exit 1; }
            mv "$wheel" "$DIR/"
        done
    fi
done
echo "$(echo "$pins" | wc -w) packages, $(ls "$DIR"/*.whl | wc -l) wheels, $(du -sh "$DIR" | cut -f1) in $DIR (for CPython $PY)"
