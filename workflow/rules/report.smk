PAGE_CODE = sorted(
    os.path.relpath(path) for path in Path(workflow.basedir, "reports", "pages").glob("*.py")
)


rule report_notebook:
    """Execute one report template with papermill. The executed notebook is kept under
    logs/ even when a cell fails (not as a log: a failed job shows its log on the console,
    which ends with the one line naming the input and the reason); the result, with cell ids
    and timings made independent of the run (reports.stable), is copied into place only on
    success."""
    input:
        unpack(report_inputs),
        # relative to the working directory, so that a moved checkout re-renders nothing
        template=os.path.relpath(f"{workflow.basedir}/reports/{{report}}.ipynb"),
        # the pages' code: a change to it renders the reports again
        pages=PAGE_CODE,
    output:
        f"{RESULTS}/reports/{{report}}.ipynb",
    log:
        f"{RESULTS}/logs/reports/{{report}}.log",
    conda:
        "../../envs/attnio.yaml"
    params:
        parameters=papermill_parameters,
        notebook=lambda wc: f"{RESULTS}/logs/reports/{wc.report}.ipynb",
    shell:
        "papermill {input.template:q} {params.notebook:q} -k python3 {params.parameters:q} "
        "> {log:q} 2>&1 && python -m reports.stable {params.notebook:q} "
        ">> {log:q} 2>&1 && cp {params.notebook:q} {output:q}"


rule report_html:
    """The executed notebook as HTML, images embedded, code hidden unless report.show_code."""
    input:
        rules.report_notebook.output,
    output:
        report(
            f"{RESULTS}/reports/{{report}}.html",
            caption="../report/reports.rst",
            category="Reports",
            labels=report_labels,
        ),
    log:
        f"{RESULTS}/logs/reports/{{report}}.html.log",
    conda:
        "../../envs/attnio.yaml"
    params:
        code=[] if config["report"]["show_code"] else ["--no-input"],
    shell:
        "jupyter nbconvert --to html {params.code:q} --stdout {input:q} > {output:q}.tmp 2> {log:q} "
        "&& mv {output:q}.tmp {output:q}"


rule index:
    """The landing page: the findings, every point with its record and log, provenance,
    validation verdicts, the tables behind the reports, the configuration."""
    input:
        reports=expand(rules.report_html.output[0], report=REPORTS),
        notebooks=expand(rules.report_notebook.output[0], report=REPORTS),
        metrics=rules.collect.output.parquet,
        env=rules.env.output,
        validation=sorted({output_of(rules.validate.output[0], p) for p in POINTS}),
        builds=rules.build_table.output[0],
        predictions=rules.predict.output.predictions,
        stage_times=rules.collect.output.stage_times,
        tables=TABLES,
    output:
        f"{RESULTS}/index.html",
    log:
        f"{RESULTS}/logs/index.log",
    conda:
        "../../envs/attnio.yaml"
    params:
        files=point_files,
        tables=[os.path.relpath(table, RESULTS) for table in TABLES],
    script:
        "../scripts/index.py"


rule pack:
    """The index with every file it links to (reports, tables, point records and logs) in
    one folder: `snakemake --report report.zip` packs it as it is, so its links work
    offline. The reports are also packed one by one, each with its own caption."""
    input:
        index=rules.index.output[0],
        reports=rules.index.input.reports,
        tables=TABLES,
    output:
        report(
            directory(f"{RESULTS}/packed/index"),
            htmlindex="index.html",
            caption="../report/index.rst",
            category="Overview",
            labels={"page": "Index", "implementations": ", ".join(SWEPT)},
        ),
    log:
        f"{RESULTS}/logs/pack.log",
    conda:
        "../../envs/attnio.yaml"
    script:
        "../scripts/pack.py"
