rule build:
    """Every Triton kernel variant of one implementation, dtype and block shape, compiled for
    one GPU target (no GPU needed): resources, occupancy and SASS instruction mix per
    variant, with PTX, cubin and SASS kept beside the record."""
    output:
        json=f"{RESULTS}/build/{{impl}}_{{dtype}}_{{blocks}}/{{target}}.json",
        artifacts=directory(f"{RESULTS}/build/{{impl}}_{{dtype}}_{{blocks}}/{{target}}"),
    log:
        f"{RESULTS}/logs/build/{{impl}}_{{dtype}}_{{blocks}}/{{target}}.log",
    params:
        points=lambda wc: " ".join(build_group_points(wc)),
        artifacts=lambda wc: f"{RESULTS}/build/{wc.impl}_{wc.dtype}_{wc.blocks}",
    resources:
        runtime=60,
    conda:
        "../../envs/attnio.yaml"
    shell:
        "python -m kernels build --target {wildcards.target} --point {params.points} "
        "--artifacts {params.artifacts} --out {output.json} > {log} 2>&1"


rule build_table:
    """Every build record into results/build.csv: a row per kernel variant and target."""
    input:
        BUILD_FILES,
    output:
        f"{RESULTS}/build.csv",
    log:
        f"{RESULTS}/logs/build_table.log",
    conda:
        "../../envs/attnio.yaml"
    script:
        "../scripts/build_table.py"
