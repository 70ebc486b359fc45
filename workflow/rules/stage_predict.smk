# Reads files the run already has: on a cluster it runs on the submitting host.
localrules:
    predict_stages,


rule predict_stages:
    """Each stage of the materialized paths for every staged sweep point, on the GPUs of
    kernels/study/gpus.py and on this machine (its measured ceilings): the time each cache
    level, DRAM, the products and the exponentials would take, warm (a band) and cold. Without
    usable ceilings (cuda asked for without a GPU) only the GPUs' rows are written."""
    input:
        rules.ceilings.output[0],
    output:
        f"{RESULTS}/model/stage_predictions.csv",
    log:
        f"{RESULTS}/logs/predict_stages.log",
    conda:
        "../../envs/attnio.yaml"
    params:
        sweep=config["sweep"],
    script:
        "../scripts/predict_stages.py"
