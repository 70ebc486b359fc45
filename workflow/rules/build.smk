rule build:
    """The Triton kernel variants of one implementation, dtype, block shape, T and d,
    compiled for every build target (no GPU needed): resources, occupancy and SASS
    instruction mix per variant, with PTX, cubin and SASS kept beside the record."""
    output:
        json=f"{RESULTS}/build/{{impl}}_{{dtype}}_{{blocks}}/T{{tokens}}-d{{head_dim}}.json",
        artifacts=directory(f"{RESULTS}/build/{{impl}}_{{dtype}}_{{blocks}}/T{{tokens}}-d{{head_dim}}"),
    log:
        f"{RESULTS}/logs/build/{{impl}}_{{dtype}}_{{blocks}}/T{{tokens}}-d{{head_dim}}.log",
    params:
        points=lambda wc: " ".join(build_points(wc)),
        targets=" ".join(BUILD_TARGETS),
    resources:
        runtime=60,
    conda:
        "../../envs/attnio.yaml"
    shell:
        "python -m kernels build --target {params.targets} --point {params.points} "
        "--artifacts {output.artifacts} --out {output.json} > {log} 2>&1"


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
