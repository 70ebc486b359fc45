rule ceilings:
    """The machine's copy bandwidth and matrix-product rate, measured once before any point:
    the rates a point's predicted time is bounded with. Timed, so it owns the machine."""
    output:
        f"{RESULTS}/ceilings.json",
    log:
        f"{RESULTS}/logs/ceilings.log",
    conda:
        "../../envs/attnio.yaml"
    threads: machine_threads
    resources:
        gpu=1 if ON_GPU else 0,
        slurm_extra="--exclusive",
        runtime=10,
    params:
        device=DEVICE,
        threads=lambda wc, threads: f"--threads {threads}" if LOCAL_CORES else "",
    shell:
        "python -m kernels ceilings --device {params.device} {params.threads} "
        "--out {output:q} > {log:q} 2>&1"


rule measure:
    """One sweep point → one JSON record (ok, skipped with its reason, or failed). A point
    predicted to take longer than limits.call_seconds per call is skipped; a job still
    running after limits.job_seconds is stopped and its record says failed."""
    input:
        validation=validation_of,
        builds=builds_of,
        ceilings=rules.ceilings.output[0],
    output:
        f"{RESULTS}/points/{attnio_point.POINT_PATTERN}.json",
    log:
        f"{RESULTS}/logs/measure/{attnio_point.POINT_PATTERN}.log",
    conda:
        "../../envs/attnio.yaml"
    threads: timed_threads
    resources:
        gpu=1 if ON_GPU else 0,
        slurm_extra=timed_slurm_extra,
        mem_mb=measure_mem_mb,
        runtime=JOB_MINUTES,
    params:
        point=lambda wc: quoted(point_of(wc).cli_args()),
        device=DEVICE,
        seed=config["seed"],
        limit=config["interpreter_limit"],
        threads=lambda wc, threads: f"--threads {threads}" if LOCAL_CORES else "",
        budget=config["limits"]["call_seconds"],
        time_limit=config["limits"]["job_seconds"],
        ncu="" if config["ncu"] else "--no-ncu",
        builds=lambda wc, input: (
            f"--require-build {quoted(input.builds)} --required-targets "
            f"{quoted(REQUIRED_TARGETS)}"
            if input.builds
            else ""
        ),
    shell:
        "python -m kernels measure {params.point} --device {params.device} "
        "--seed {params.seed} --interpreter-limit {params.limit} {params.ncu} {params.threads} "
        "--ceilings {input.ceilings:q} --budget-seconds {params.budget} "
        "--time-limit {params.time_limit} --require-validation {input.validation:q} "
        "{params.builds} --out {output:q} > {log:q} 2>&1"
