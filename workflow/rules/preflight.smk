rule preflight:
    """Every launch the GPU plan makes — each Triton point's call and launch candidates, and
    every validation case of its implementation, dtype and blocks — compiled for the GPU
    target (the local GPU; on a machine without one, the configured build targets) and held
    against its shared-memory, register and thread limits, before any GPU time is spent
    (kernels.build.preflight). On a GPU, validation leaves out the cases found unlaunchable
    here, naming why, and the compiles fill Triton's cache for the jobs after it. Elsewhere
    not part of `all`: `snakemake preflight` checks a GPU preset on any machine."""
    output:
        f"{RESULTS}/preflight.json",
    log:
        f"{RESULTS}/logs/preflight.log",
    benchmark:
        f"{RESULTS}/benchmarks/preflight.tsv"
    conda:
        "../../envs/attnio.yaml"
    threads: machine_threads
    resources:
        runtime=rule_minutes("preflight"),
    params:
        time_limit=RULE_SECONDS["preflight"],
        points=preflight_points,
        targets=REQUIRED_TARGETS,
    shell:
        "python -m kernels preflight {params.points:q} --target {params.targets:q} "
        "--jobs {threads} --time-limit {params.time_limit:q} --out {output:q} > {log:q} 2>&1"
