rule budget:
    """How long this study will take on this machine's GPU, before it starts
    (kernels.study.budget): the plan's jobs costed from the model, with a job's start-up and
    one kernel compile measured here. Not part of `all`: scripts/gpu_study.sh asks for it."""
    output:
        f"{RESULTS}/budget.json",
    log:
        f"{RESULTS}/logs/budget.log",
    conda:
        "../../envs/attnio.yaml"
    params:
        points=[point.name for point in POINTS],
        cores=machine_threads(),
    script:
        "../scripts/budget.py"
