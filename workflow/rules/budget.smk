rule budget:
    """How long this study will take on this machine, before it starts (kernels.models.budget):
    every job of the plan costed (start-ups measured here with a throw-away workflow, compiles
    counted per kernel variant, the work from the model) and scheduled as the workflow runs
    them. Not part of `all`: scripts/gpu_study.sh asks for it."""
    output:
        f"{RESULTS}/budget.json",
    log:
        f"{RESULTS}/logs/budget.log",
    conda:
        "../../envs/attnio.yaml"
    threads: machine_threads
    params:
        device=DEVICE,
        cores=machine_threads(),
        points=[point.name for point in POINTS],
        build_jobs=BUILD_JOBS,
        build_targets=BUILD_TARGETS,
        required_targets=REQUIRED_TARGETS,
        candidates=config["build"]["candidates"],
        validations=sorted({point.validation_name for point in POINTS}),
        gathers=[f"{impl}_{dtype}" for impl, dtype in GROUPS],
        reports=budget_report_rules,
        calibration_page=calibration_page,
        tile_errors=lambda wc: any("tile_errors" in r for r in budget_report_rules().values()),
        rules=lambda wc: sorted(rule.name for rule in workflow.rules),
        interpreter_limit=config["interpreter_limit"],
        call_seconds=config["limits"]["call_seconds"],
        timing=config["timing"],
        ceilings_json=f"{RESULTS}/ceilings.json",
        preflight_json=f"{RESULTS}/preflight.json",
        # on a GPU validation waits for the preflight (a rehearsal plans without it)
        preflight_in_plan=lambda wc: bool(getattr(rules.validate.input, "preflight", [])),
    script:
        "../scripts/budget.py"
