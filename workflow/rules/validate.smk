rule validate:
    """One implementation in one dtype (and block shape) against the float64 definition.
    The verdicts are written even when one is unexpected; the points of an implementation
    that failed are then recorded as skipped, never measured."""
    output:
        f"{RESULTS}/validate/{{impl}}_{{dtype}}_{{blocks}}.json",
    log:
        f"{RESULTS}/logs/validate/{{impl}}_{{dtype}}_{{blocks}}.log",
    params:
        device=DEVICE,
        seed=config["seed"],
        blocks=lambda wc: " ".join(
            f"--block-m {m} --block-n {n}"
            for m, n in [attnio_sweep.parse_blocks(wc.blocks)]
            if m is not None
        ),
    resources:
        gpu=1 if ON_GPU else 0,
        bench=lambda wc: times_on_this_machine(wc.impl),
        runtime=30,
    conda:
        "../../envs/attnio.yaml"
    shell:
        "python -m kernels validate --impl {wildcards.impl} --dtype {wildcards.dtype} "
        "--device {params.device} --seed {params.seed} {params.blocks} "
        "--quiet --exit-zero --json {output} > {log} 2>&1"
