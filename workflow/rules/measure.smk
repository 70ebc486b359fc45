rule measure:
    """One sweep point → one JSON record (ok, skipped with its reason, or failed)."""
    input:
        validation=validation_of,
        builds=builds_of,
    output:
        f"{RESULTS}/points/{attnio_point.POINT_PATTERN}.json",
    log:
        f"{RESULTS}/logs/measure/{attnio_point.POINT_PATTERN}.log",
    conda:
        "../../envs/attnio.yaml"
    resources:
        gpu=1 if ON_GPU else 0,
        bench=lambda wc: times_on_this_machine(wc.impl),
        mem_mb=measure_mem_mb,
        runtime=60,
    params:
        point=lambda wc: quoted(point_of(wc).cli_args()),
        device=DEVICE,
        seed=config["seed"],
        limit=config["interpreter_limit"],
        ncu="" if config["ncu"] else "--no-ncu",
        builds=lambda wc, input: (
            f"--require-build {quoted(input.builds)} --required-targets "
            f"{quoted(REQUIRED_TARGETS)}"
            if input.builds
            else ""
        ),
    shell:
        "python -m kernels measure {params.point} --device {params.device} "
        "--seed {params.seed} --interpreter-limit {params.limit} {params.ncu} "
        "--require-validation {input.validation:q} {params.builds} --out {output:q} > {log:q} 2>&1"
