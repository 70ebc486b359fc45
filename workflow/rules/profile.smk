# The GPU study's profiling (scripts/gpu_profile.sh asks for `profile`; not part of `all`):
# Nsight Compute on the headline points with the launch that was timed, and the tests marked
# gpu, trimmed to what the study's own jobs do not already check.


include: "profile_common.smk"


rule profile_ncu:
    """One headline point's call under Nsight Compute (one call inside the profiler range,
    after a warm-up that compiles; clocks left alone), with the launch its record was timed
    with; the report exported as CSV (the details page, which kernels.measure.ncu parses)."""
    input:
        record=profiled_record,
    output:
        report=f"{PROFILE}/{{impl}}.ncu-rep",
        csv=f"{PROFILE}/{{impl}}.csv",
    log:
        f"{RESULTS}/logs/profile/ncu_{{impl}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/profile_ncu/{{impl}}.tsv"
    wildcard_constraints:
        impl="|".join(PROFILED_POINTS) or "none",
    conda:
        "../../envs/attnio.yaml"
    resources:
        gpu=1,
        runtime=10,
    params:
        metrics=",".join(NCU_METRICS),
        point=lambda wc: PROFILED_POINTS[wc.impl].cli_args(),
        seed=config["seed"],
        launch=timed_launch,
    shell:
        "ATTNIO_INTERPRET=0 ncu --clock-control none --profile-from-start off "
        "--metrics {params.metrics:q} --export {output.report:q} --force-overwrite "
        "python -m kernels ncu-target {params.point:q} --seed {params.seed:q} {params.launch:q} "
        "> {log:q} 2>&1 && ncu --import {output.report:q} --csv --print-units base "
        "> {output.csv:q} 2>> {log:q}"


rule profile_summary:
    """A headline point's Nsight Compute figures (DRAM and L2 bytes, time, per kernel) beside
    its record's model bytes and the launch profiled: what reports.headline reads."""
    input:
        record=profiled_record,
        report=rules.profile_ncu.output.report,
        csv=rules.profile_ncu.output.csv,
    output:
        f"{PROFILE}/{{impl}}.json",
    log:
        f"{RESULTS}/logs/profile/summary_{{impl}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/profile_summary/{{impl}}.tsv"
    wildcard_constraints:
        impl="|".join(PROFILED_POINTS) or "none",
    conda:
        "../../envs/attnio.yaml"
    params:
        point=lambda wc: PROFILED_POINTS[wc.impl].name,
        seed=config["seed"],
        launch=timed_launch,
    script:
        "../scripts/profile_summary.py"


# Left out of the profiling's gpu tests, each already done by the GPU study itself:
# - every launch candidate timed and the fastest kept: each triton_flash point of the study
#   is built with its candidates and timed with each (its record's launch_candidates);
# - Nsight Compute's DRAM bytes parsed: profile_ncu runs it on the headline points and
#   profile_summary parses it with the same parser (kernels.measure.ncu).
# test_gpu.py's validation test leaves out what the study's validate jobs cover (bfloat16).
GPU_TESTS = os.path.relpath(f"{workflow.basedir}/tests/test_gpu.py")
GPU_TESTS_DONE_BY_STUDY = [
    "test_every_launch_candidate_is_timed_and_the_fastest_kept",
    "test_nsight_compute_dram_bytes_are_parsed",
]


rule gpu_tests:
    """The tests marked gpu that the study does not already make, with a JUnit XML of their
    outcome. Failing tests are a result (pytest's exit 1: the XML says which); any other
    exit (no tests, a usage error, an internal error) fails the job."""
    output:
        f"{RESULTS}/profile/gpu_tests.xml",
    log:
        f"{RESULTS}/logs/profile/gpu_tests.log",
    benchmark:
        f"{RESULTS}/benchmarks/gpu_tests.tsv"
    conda:
        "../../envs/attnio.yaml"
    resources:
        gpu=1,
        runtime=20,
    params:
        tests=GPU_TESTS,
        deselect=" and ".join(f"not {name}" for name in GPU_TESTS_DONE_BY_STUDY),
    shell:
        "python -m pytest -m gpu {params.tests:q} -k {params.deselect:q} -p no:cacheprovider -q -rs "
        "--junitxml {output:q} > {log:q} 2>&1 || test $? -eq 1"


rule profile:
    """Everything scripts/gpu_profile.sh makes."""
    input:
        expand(rules.profile_summary.output[0], impl=sorted(PROFILED_POINTS)),
        rules.gpu_tests.output,
