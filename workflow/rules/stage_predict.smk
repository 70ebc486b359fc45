# Reads files the run already has: on a cluster it runs on the submitting host.
localrules:
    predict_stages,
    backward_model,


rule predict_stages:
    """Each stage of the materialized paths for every staged sweep point, on the GPUs of
    kernels/planning/gpus.py and on this machine (its measured ceilings): the time each cache
    level, DRAM, the products and the exponentials would take, warm (a band) and cold. Without
    usable ceilings (cuda asked for without a GPU) only the GPUs' rows are written."""
    input:
        rules.ceilings.output[0],
    output:
        f"{RESULTS}/model/stage_predictions.csv",
    log:
        f"{RESULTS}/logs/predict_stages.log",
    benchmark:
        f"{RESULTS}/benchmarks/predict_stages.tsv"
    conda:
        "../../envs/attnio.yaml"
    params:
        sweep=config["sweep"],
    script:
        "../scripts/predict_stages.py"


rule backward_model:
    """The backward on every target from the models: each kernel of each backward point on
    the GPUs and this machine (hierarchical roofline, warm band and cold), where storing P
    and recomputing it cross over in T, and what each path keeps at the training shape."""
    input:
        rules.ceilings.output[0],
    output:
        predictions=f"{RESULTS}/model/backward_predictions.csv",
        crossing=f"{RESULTS}/model/recompute_crossing.csv",
        training=f"{RESULTS}/model/training_memory.csv",
    log:
        f"{RESULTS}/logs/backward_model.log",
    benchmark:
        f"{RESULTS}/benchmarks/backward_model.tsv"
    conda:
        "../../envs/attnio.yaml"
    params:
        sweep=config["sweep"],
        training=config["training"],
    script:
        "../scripts/backward_model.py"
