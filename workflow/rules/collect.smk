# Gathering, collecting and reporting read files the run already has: on a cluster they
# run on the submitting host instead of waiting for a node.
localrules:
    gather,
    build_table,
    collect,
    model,
    predict,
    report_notebook,
    report_html,
    index,
    pack,
    budget,


rule gather:
    """The records of one implementation and dtype, each checked against the record
    schema, into one JSON-lines file."""
    input:
        lambda wc: [output_of(rules.measure.output[0], p) for p in GROUPS[(wc.impl, wc.dtype)]],
    output:
        f"{RESULTS}/gathered/{{impl}}_{{dtype}}.jsonl",
    log:
        f"{RESULTS}/logs/gather/{{impl}}_{{dtype}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/gather/{{impl}}_{{dtype}}.tsv"
    conda:
        "../../envs/attnio.yaml"
    script:
        "../scripts/gather.py"


rule collect:
    """Every record into one tidy table (a row per point), a long table of transfers and one
    of the materialized paths' timed stages; the backward points' in three tables of their own."""
    input:
        records=[rules.gather.output[0].format(impl=impl, dtype=dtype) for impl, dtype in GROUPS],
        env=rules.env.output,
    output:
        parquet=f"{RESULTS}/metrics.parquet",
        csv=f"{RESULTS}/metrics.csv",
        stages=f"{RESULTS}/stages.csv",
        stage_times=f"{RESULTS}/stage_times.csv",
        backward=f"{RESULTS}/backward.csv",
        backward_stages=f"{RESULTS}/backward_stages.csv",
        backward_stage_times=f"{RESULTS}/backward_stage_times.csv",
    log:
        f"{RESULTS}/logs/collect.log",
    benchmark:
        f"{RESULTS}/benchmarks/collect.tsv"
    conda:
        "../../envs/attnio.yaml"
    script:
        "../scripts/collect.py"


rule model:
    """The cost model's own tables for the reports: S/P sizes against T, the fused kernel's
    traffic against its block size for every swept case, the seed's Figure 4 example, the
    decode model of every inference case (kernels.models.decode) and each mask's kept scores
    against the tiles a block-sparse kernel visits (kernels.models.mask_tiles)."""
    output:
        sizes=f"{RESULTS}/model/matrix_sizes.csv",
        block_traffic=f"{RESULTS}/model/block_traffic.csv",
        example=f"{RESULTS}/model/softmax_example.json",
        decode=f"{RESULTS}/model/decode.csv",
        mask_tiles=f"{RESULTS}/model/mask_tiles.csv",
    log:
        f"{RESULTS}/logs/model.log",
    benchmark:
        f"{RESULTS}/benchmarks/model.tsv"
    conda:
        "../../envs/attnio.yaml"
    params:
        sweep=config["sweep"],
    script:
        "../scripts/model.py"


rule predict:
    """What each GPU of kernels/planning/gpus.py would do with the sweep's shapes, both paths,
    over a grid of T: DRAM bytes as a band (the L2 hand-off) and roofline time floors, per
    kernel; no prediction where the build stage found a kernel does not build there."""
    input:
        builds=rules.build_table.input,
    output:
        gpus=f"{RESULTS}/model/gpus.csv",
        predictions=f"{RESULTS}/model/predictions.csv",
        kernels=f"{RESULTS}/model/predicted_kernels.csv",
    log:
        f"{RESULTS}/logs/predict.log",
    benchmark:
        f"{RESULTS}/benchmarks/predict.tsv"
    conda:
        "../../envs/attnio.yaml"
    params:
        sweep=config["sweep"],
    script:
        "../scripts/predict.py"
