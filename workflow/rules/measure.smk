def validation_of(wildcards):
    return output_of(rules.validate.output[0], point_of(wildcards))


def builds_of(wildcards):
    """The build result a point depends on (none for the torch paths or without targets)."""
    point = point_of(wildcards)
    if point.build_name not in BUILD_JOBS:
        return []
    return [output_of(rules.build.output.json, point)]


def measure_mem_mb(wildcards):
    from kernels.study.cost import predicted_bytes

    need = predicted_bytes(point_of(wildcards))
    return max(1024, int(need / 2**20 * 1.25) + 512)


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
