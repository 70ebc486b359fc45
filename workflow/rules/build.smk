rule build:
    """The Triton kernel variants of one implementation, dtype, block shape, T and d,
    compiled for every build target (no GPU needed): resources, occupancy and SASS
    instruction mix per variant (and per launch candidate of the fused kernel), with TTIR,
    PTX, cubin and SASS kept beside the record."""
    output:
        json=f"{RESULTS}/build/{attnio_point.BUILD_PATTERN}.json",
        artifacts=directory(f"{RESULTS}/build/{attnio_point.BUILD_PATTERN}"),
    log:
        f"{RESULTS}/logs/build/{attnio_point.BUILD_PATTERN}.log",
    benchmark:
        f"{RESULTS}/benchmarks/build/{attnio_point.BUILD_PATTERN}.tsv"
    conda:
        "../../envs/attnio.yaml"
    resources:
        runtime=rule_minutes("build"),
    params:
        time_limit=RULE_SECONDS["build"],
        points=lambda wc: BUILD_JOBS[attnio_point.BUILD_PATTERN.format(**wc)],
        targets=BUILD_TARGETS,
        candidates="--candidates" if config["build"]["candidates"] else "--no-candidates",
    shell:
        "python -m kernels build --target {params.targets:q} --point {params.points:q} "
        "{params.candidates} --time-limit {params.time_limit:q} --artifacts {output.artifacts:q} "
        "--out {output.json:q} > {log:q} 2>&1"


rule build_table:
    """Every build record into results/build.csv: a row per kernel variant and target."""
    input:
        sorted(
            output_of(rules.build.output.json, Point.from_name(names[0]))
            for names in BUILD_JOBS.values()
        ),
    output:
        f"{RESULTS}/build.csv",
    log:
        f"{RESULTS}/logs/build_table.log",
    benchmark:
        f"{RESULTS}/benchmarks/build_table.tsv"
    conda:
        "../../envs/attnio.yaml"
    script:
        "../scripts/build_table.py"
