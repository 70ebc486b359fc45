rule budget:
    """How long this study will take on this machine, before it starts (kernels.estimate):
    Snakemake's own plan of the study, each job costed from its benchmark record of the last
    run here, or from a calibration (the study's workflow on its smallest points, in a
    scratch folder). Not part of `all`: scripts/gpu_study.sh asks for it."""
    output:
        f"{RESULTS}/budget.json",
    log:
        f"{RESULTS}/logs/budget.log",
    conda:
        "../../envs/attnio.yaml"
    threads: machine_threads
    params:
        snakefile=str(Path(workflow.basedir, "Snakefile")),
        config=lambda wc: config,
        device=DEVICE,
        cores=machine_threads(),
        ceilings_json=rules.ceilings.output[0],
        # the calibration stops at the tables and one page (every other page costed as it)
        calibration_targets=TABLES + expand(rules.report_html.output.html, report=REPORTS[:1]),
        # the jobs a checkpoint adds once it has run: one per checkpoint job
        followers={"report_notebook": "report_html"},
    script:
        "../scripts/budget.py"
