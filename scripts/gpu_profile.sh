#!/usr/bin/env bash
# scripts/gpu_profile.sh — after scripts/gpu_study.sh, on the same GPU machine (or on one
# whose results/ holds what the study made): one command well under its 10 minutes, from the
# project root:
#   OUT=/some/folder scripts/gpu_profile.sh   on the GPU machine
#   scripts/gpu_profile.sh --rehearse         anywhere: every command checked, no GPU work
#
# 1. packages, as scripts/gpu_study.sh installs them (again only on a fresh machine).
# 2. snakemake profile (workflow/rules/profile.smk), same config as the study, --keep-going:
#    - Nsight Compute on the two headline points (triton_naive and triton_flash, T = 8,192,
#      d = 128, bf16, full), each with the launch its record was timed with, into
#      results/profile/ncu/<impl>.ncu-rep, .csv and .json (what the headline reads);
#    - the tests marked gpu that the study does not already make (results/profile/
#      gpu_tests.xml; rule gpu_tests says which are left out and why).
#    Points the profile needs and results/ lacks are measured first, as the study would.
# 3. with $OUT set: results/ packed there (profile-results.tar.gz), the two .ncu-rep
#    reports, the console log, and profile-summary.txt (Nsight Compute records, the gpu tests,
#    the headline, seconds taken against the estimate), printed last.
# --rehearse (no GPU needed): step 2 as a dry run with the same arguments, every command
# checked by scripts/rehearse.py (the ncu-target commands parsed, the pytest selection
# collected); $OUT packed into a temporary folder unless OUT is set.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/gpu_common.sh
source scripts/gpu_common.sh
gpu_init profile "$@"

step packages install_packages
check_stack
if [[ $REHEARSE == 0 ]] && ! command -v ncu > /dev/null; then
    echo "ncu (Nsight Compute) is not on PATH: the profile_ncu jobs will fail, the gpu tests still run"
fi

step profile smk profile || RC=$?
exit "$RC"
