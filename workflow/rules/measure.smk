rule measure:
    """One sweep point → one JSON record (ok, skipped with its reason, or failed)."""
    input:
        validation=lambda wc: f"{RESULTS}/validate/{attnio_sweep.validation_name(point_of(wc))}.json",
        builds=builds_of_point,
    output:
        f"{RESULTS}/points/{{impl}}/{{dtype}}/B{{batch}}-H{{heads}}-T{{tokens}}-d{{head_dim}}-{{mask}}-{{blocks}}.json",
    log:
        f"{RESULTS}/logs/measure/{{impl}}/{{dtype}}/B{{batch}}-H{{heads}}-T{{tokens}}-d{{head_dim}}-{{mask}}-{{blocks}}.log",
    params:
        point=lambda wc: " ".join(attnio_sweep.cli_args(point_of(wc))),
        device=DEVICE,
        seed=config["seed"],
        limit=config["interpreter_limit"],
        ncu="" if config["ncu"] else "--no-ncu",
        builds=lambda wc, input: (f"--require-build {input.builds} --required-targets "
                                  f"{' '.join(REQUIRED_TARGETS)}" if input.builds else ""),
    resources:
        gpu=1 if ON_GPU else 0,
        bench=lambda wc: times_on_this_machine(wc.impl),
        mem_mb=measure_mem_mb,
        runtime=60,
    conda:
        "../../envs/attnio.yaml"
    shell:
        "python -m kernels measure {params.point} --device {params.device} "
        "--seed {params.seed} --interpreter-limit {params.limit} {params.ncu} "
        "--require-validation {input.validation} {params.builds} --out {output} > {log} 2>&1"
