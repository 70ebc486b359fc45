rule ceilings:
    """The machine's copy bandwidth and matrix-product rate, measured once before any point:
    the rates a point's predicted time is bounded with; and the rates of the stages'
    operations (the sweep's products, passes, fixed costs) that its expected time is made of.
    Timed, so it owns the machine."""
    output:
        f"{RESULTS}/ceilings.json",
    log:
        f"{RESULTS}/logs/ceilings.log",
    benchmark:
        f"{RESULTS}/benchmarks/ceilings.tsv"
    conda:
        "../../envs/attnio.yaml"
    threads: machine_threads
    resources:
        gpu=1 if ON_GPU else 0,
        slurm_extra="--exclusive",
        runtime=rule_minutes("ceilings"),
    params:
        time_limit=RULE_SECONDS["ceilings"],
        device=DEVICE,
        threads=threads_option,
        products=PRODUCT_SHAPES,
        cpu_seconds=config["timing"]["cpu_seconds"],
        stage_seconds=config["timing"]["stage_seconds"],
    shell:
        "python -m kernels ceilings --device {params.device:q} {params.threads:q} "
        "--products {params.products:q} --cpu-seconds {params.cpu_seconds:q} "
        "--stage-seconds {params.stage_seconds:q} --time-limit {params.time_limit:q} "
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
    benchmark:
        f"{RESULTS}/benchmarks/measure/{attnio_point.POINT_PATTERN}.tsv"
    conda:
        "../../envs/attnio.yaml"
    threads: timed_threads
    resources:
        gpu=1 if ON_GPU else 0,
        slurm_extra=timed_slurm_extra,
        mem_mb=measure_mem_mb,
        runtime=JOB_MINUTES,
    params:
        point=lambda wc: point_of(wc).cli_args(),
        device=DEVICE,
        seed=config["seed"],
        limit=config["interpreter_limit"],
        threads=threads_option,
        budget=config["limits"]["call_seconds"],
        time_limit=config["limits"]["job_seconds"],
        cpu_seconds=config["timing"]["cpu_seconds"],
        stage_seconds=config["timing"]["stage_seconds"],
        ncu=[] if config["ncu"] else ["--no-ncu"],
        builds=lambda wc, input: (
            ["--require-build", *input.builds, "--required-targets", *REQUIRED_TARGETS]
            if input.builds
            else []
        ),
    shell:
        "python -m kernels measure {params.point:q} --device {params.device:q} "
        "--seed {params.seed:q} --interpreter-limit {params.limit:q} {params.ncu:q} "
        "{params.threads:q} --ceilings {input.ceilings:q} --budget-seconds {params.budget:q} "
        "--time-limit {params.time_limit:q} --cpu-seconds {params.cpu_seconds:q} "
        "--stage-seconds {params.stage_seconds:q} --require-validation {input.validation:q} "
        "{params.builds:q} --out {output:q} > {log:q} 2>&1"
