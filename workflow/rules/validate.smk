rule validate:
    """One implementation in one dtype (and block shape) against the float64 definition, and
    its gradients where a backward point needs them.
    The verdicts are written even when one is unexpected; the points of an implementation
    that failed are then recorded as skipped, never measured."""
    input:
        # on a GPU: the cases whose launches cannot run there are left out, naming why (without
        # one, a cuda study's validation says the device is missing and launches nothing)
        preflight=[rules.preflight.output[0]] if LOCAL_TARGET else [],
    output:
        f"{RESULTS}/validate/{attnio_point.VALIDATION_PATTERN}.json",
    log:
        f"{RESULTS}/logs/validate/{attnio_point.VALIDATION_PATTERN}.log",
    benchmark:
        f"{RESULTS}/benchmarks/validate/{attnio_point.VALIDATION_PATTERN}.tsv"
    conda:
        "../../envs/attnio.yaml"
    resources:
        gpu=1 if ON_GPU else 0,
        runtime=rule_minutes("validate"),
    params:
        time_limit=RULE_SECONDS["validate"],
        device=DEVICE,
        seed=config["seed"],
        preflight=lambda wc, input: ["--preflight", *input.preflight] if input.preflight else [],
        # the gradients too, where a backward point of the sweep depends on this validation
        backward=lambda wc: (
            ["--backward"]
            if attnio_point.VALIDATION_PATTERN.format(
                impl=wc.impl, dtype=wc.dtype, blocks=wc.blocks
            )
            in BACKWARD_VALIDATIONS
            else []
        ),
        blocks=lambda wc: [
            arg
            for m, n in [attnio_point.parse_blocks(wc.blocks)]
            if m is not None
            for arg in ("--block-m", m, "--block-n", n)
        ],
    shell:
        "python -m kernels validate --impl {wildcards.impl:q} --dtype {wildcards.dtype:q} "
        "--device {params.device:q} --seed {params.seed:q} {params.blocks:q} {params.preflight:q} {params.backward:q} "
        "--time-limit {params.time_limit:q} --quiet --exit-zero --json {output:q} > {log:q} 2>&1"


rule tile_errors:
    """The tile-local and the fused kernel against float64 over T and BLOCK_N, in the same
    Triton mode as validation: the table behind the tile-softmax report's error maps."""
    output:
        f"{RESULTS}/tile_errors.csv",
    log:
        f"{RESULTS}/logs/tile_errors.log",
    benchmark:
        f"{RESULTS}/benchmarks/tile_errors.tsv"
    conda:
        "../../envs/attnio.yaml"
    resources:
        gpu=1 if ON_GPU else 0,
        runtime=rule_minutes("tile_errors"),
    params:
        time_limit=RULE_SECONDS["tile_errors"],
        device=DEVICE,
        seed=config["seed"],
    shell:
        "python -m kernels tile-errors --device {params.device:q} --seed {params.seed:q} "
        "--time-limit {params.time_limit:q} --out {output:q} > {log:q} 2>&1"
