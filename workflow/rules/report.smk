PAGE_CODE = sorted(
    os.path.relpath(path) for path in Path(workflow.basedir, "reports", "pages").glob("*.py")
)


# A page whose notebook raises never takes the others down: its notebook job ends well and
# its outcome says why (reports.pages.outcome); the index, which reads every outcome (so the
# notebook rule is a checkpoint), links the pages that rendered and names the failed ones, the
# pack holds what exists, and the run ends non-zero naming them (print_run_summary). The
# next run tries a failed page again (retry_failed_pages).
checkpoint report_notebook:
    """Execute one report template with papermill into logs/ (the executed notebook is kept
    there for the reader, also when a cell raised; cell ids and timings made independent of
    the run by reports.stable) and write its outcome: rendered, or failed with the
    notebook's first error line and its log. The job fails only when papermill could not
    run the notebook at all."""
    input:
        unpack(report_inputs),
        # relative to the working directory, so that a moved checkout re-renders nothing
        template=os.path.relpath(f"{workflow.basedir}/reports/{{report}}.ipynb"),
        # the pages' code: a change to it renders the reports again
        pages=PAGE_CODE,
    output:
        outcome=report_outcome("{report}"),
        notebook=f"{RESULTS}/logs/reports/{{report}}.ipynb",
    log:
        f"{RESULTS}/logs/reports/{{report}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/report_notebook/{{report}}.tsv"
    conda:
        "../../envs/attnio.yaml"
    resources:
        runtime=rule_minutes("report"),
    params:
        time_limit=RULE_SECONDS["report"],
        parameters=papermill_parameters,
        # what report_html published for it earlier: a failed page removes them
        published=lambda wc: [
            f"--replaces={path}" for path in expand(rules.report_html.output, report=wc.report)
        ],
    shell:
        "python -m reports.pages.outcome run {input.template:q} {output.notebook:q} "
        "{output.outcome:q} {log:q} {params.published:q} --time-limit {params.time_limit:q} "
        "-- {params.parameters:q}"


rule report_html:
    """A page that rendered: its executed notebook in place, and as HTML, images embedded,
    code hidden unless report.show_code. Refused for a page whose notebook failed."""
    input:
        outcome=rules.report_notebook.output.outcome,
        notebook=rules.report_notebook.output.notebook,
    output:
        notebook=f"{RESULTS}/reports/{{report}}.ipynb",
        html=report(
            f"{RESULTS}/reports/{{report}}.html",
            caption="../report/reports.rst",
            category="Reports",
            labels=report_labels,
        ),
    log:
        f"{RESULTS}/logs/reports/{{report}}.html.log",
    benchmark:
        f"{RESULTS}/benchmarks/report_html/{{report}}.tsv"
    conda:
        "../../envs/attnio.yaml"
    params:
        code=[] if config["report"]["show_code"] else ["--no-input"],
    shell:
        "python -m reports.pages.publish {input.outcome:q} {input.notebook:q} {output.notebook:q} "
        "{output.html:q} {params.code:q} > {log:q} 2>&1"


rule index:
    """The landing page: the findings, every page that rendered and each that failed (its
    first error line, its log), every point with its record and log, provenance,
    validation verdicts, where the run's time went (the jobs' benchmark records, tabled
    here first: kernels.io.benchmarks), the tables behind the reports, the configuration."""
    input:
        unpack(rendered_pages),
        outcomes=expand(rules.report_notebook.output.outcome, report=REPORTS),
        metrics=rules.collect.output.parquet,
        env=rules.env.output,
        validation=sorted({output_of(rules.validate.output[0], p) for p in POINTS}),
        builds=rules.build_table.output[0],
        predictions=rules.predict.output.predictions,
        stage_times=rules.collect.output.stage_times,
        backward=rules.collect.output.backward,
        training=rules.backward_model.output.training,
        crossing=rules.backward_model.output.crossing,
        mask_tiles=rules.model.output.mask_tiles,
        tables=TABLES,
    output:
        f"{RESULTS}/index.html",
        # where the run's time went, from the benchmark record of every job of this study but
        # the index's and the pack's (theirs are written after them): a row per job and one per
        # rule; and the records left out (of jobs not in this sweep, or damaged), named
        benchmarks=f"{RESULTS}/benchmarks.csv",
        benchmarks_by_rule=f"{RESULTS}/benchmarks_by_rule.csv",
        benchmarks_left_out=f"{RESULTS}/benchmarks_left_out.csv",
    log:
        f"{RESULTS}/logs/index.log",
    benchmark:
        f"{RESULTS}/benchmarks/index.tsv"
    conda:
        "../../envs/attnio.yaml"
    params:
        files=point_files,
        tables=[os.path.relpath(table, RESULTS) for table in TABLES],
        # the records' folder and the jobs' logs (results/benchmarks and results/logs, beside
        # benchmarks.csv)
        benchmarks=lambda wc, output: str(Path(output.benchmarks).with_suffix("")),
        logs=lambda wc, output: str(Path(output.benchmarks).parent / "logs"),
        # their records are those of the run before: each is written once its job has ended
        not_yet=["index", "pack"],
        # the records this study's jobs write: any other under benchmarks/ is stale
        planned=study_benchmarks,
    script:
        "../scripts/index.py"


rule pack:
    """The index with every file it links to that exists (the reports that rendered, the
    logs of those that failed, tables, point records and logs) in one folder: `snakemake --report report.zip` packs it as it is, so its links work
    offline. The reports are also packed one by one, each with its own caption."""
    input:
        unpack(rendered_pages),
        index=rules.index.output[0],
        tables=TABLES,
        # linked from the index: asked for here, so that a deleted one is made again
        benchmarks=[
            rules.index.output.benchmarks,
            rules.index.output.benchmarks_by_rule,
            rules.index.output.benchmarks_left_out,
        ],
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
    benchmark:
        f"{RESULTS}/benchmarks/pack.tsv"
    conda:
        "../../envs/attnio.yaml"
    script:
        "../scripts/pack.py"
