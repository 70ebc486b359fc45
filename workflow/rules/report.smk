rule report_notebook:
    """Execute one report template with papermill. The executed notebook is kept under
    logs/ even when a cell fails; the result is copied into place only on success."""
    input:
        template=f"{workflow.basedir}/reports/{{report}}.ipynb",
        metrics=rules.collect.output.parquet,
        stages=rules.collect.output.stages,
        env=rules.env.output,
        builds=lambda wc: [rules.build_table.output[0]] if wc.report == "build" else [],
    output:
        f"{RESULTS}/reports/{{report}}.ipynb",
    log:
        notebook=f"{RESULTS}/logs/reports/{{report}}.ipynb",
        messages=f"{RESULTS}/logs/reports/{{report}}.log",
    params:
        package=lambda wc, input: os.path.dirname(os.path.dirname(input.template)),
        builds=lambda wc, input: f"-p builds {input.builds}" if input.builds else "",
    conda:
        "../../envs/attnio.yaml"
    shell:
        "PYTHONPATH={params.package}:${{PYTHONPATH:-}} papermill {input.template} {log.notebook} "
        "-k python3 -p metrics {input.metrics} -p stages {input.stages} -p env {input.env} "
        "{params.builds} "
        "> {log.messages} 2>&1 && cp {log.notebook} {output}"


rule report_html:
    """The executed notebook as HTML, images embedded, code hidden unless report.show_code."""
    input:
        f"{RESULTS}/reports/{{report}}.ipynb",
    output:
        report(
            f"{RESULTS}/reports/{{report}}.html",
            caption="../report/reports.rst",
            category="Reports",
        ),
    log:
        f"{RESULTS}/logs/reports/{{report}}.html.log",
    params:
        code="" if config["report"]["show_code"] else "--no-input",
    conda:
        "../../envs/attnio.yaml"
    shell:
        "jupyter nbconvert --to html {params.code} --stdout {input} > {output}.tmp 2> {log} "
        "&& mv {output}.tmp {output}"


rule index:
    """The landing page: links, provenance, validation verdicts and warnings."""
    input:
        reports=expand(f"{RESULTS}/reports/{{report}}.html", report=REPORTS),
        metrics=rules.collect.output.parquet,
        env=rules.env.output,
        validation=VALIDATION_FILES,
        builds=rules.build_table.output[0],
    output:
        report(f"{RESULTS}/index.html", caption="../report/index.rst", category="Overview"),
    log:
        f"{RESULTS}/logs/index.log",
    params:
        reports=REPORTS,
    conda:
        "../../envs/attnio.yaml"
    script:
        "../scripts/index.py"
