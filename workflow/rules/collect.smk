# Gathering, collecting and reporting read files the run already has: on a cluster they
# run on the submitting host instead of waiting for a node.
localrules:
    gather,
    build_table,
    collect,
    report_notebook,
    report_html,
    index,


rule gather:
    """The records of one implementation and dtype, each checked against the record
    schema, into one JSON-lines file."""
    input:
        group_records,
    output:
        f"{RESULTS}/gathered/{{impl}}_{{dtype}}.jsonl",
    log:
        f"{RESULTS}/logs/gather/{{impl}}_{{dtype}}.log",
    conda:
        "../../envs/attnio.yaml"
    script:
        "../scripts/gather.py"


rule collect:
    """Every record into one tidy table (a row per point) and a long table of stages."""
    input:
        records=[f"{RESULTS}/gathered/{impl}_{dtype}.jsonl" for impl, dtype in GROUPS],
        validation=VALIDATION_FILES,
        env=rules.env.output,
    output:
        parquet=f"{RESULTS}/metrics.parquet",
        csv=f"{RESULTS}/metrics.csv",
        stages=f"{RESULTS}/stages.csv",
    log:
        f"{RESULTS}/logs/collect.log",
    conda:
        "../../envs/attnio.yaml"
    script:
        "../scripts/collect.py"
