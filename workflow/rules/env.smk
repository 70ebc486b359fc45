rule env:
    """Provenance: versions, processor, GPU and driver, git commit, config hash."""
    output:
        f"{RESULTS}/env.json",
    log:
        f"{RESULTS}/logs/env.log",
    benchmark:
        f"{RESULTS}/benchmarks/env.tsv"
    conda:
        "../../envs/attnio.yaml"
    params:
        device=DEVICE,
        config=config,
        # the CPU caches as the timed jobs' threads meet them (None on a cluster: the affinity)
        threads=LOCAL_CORES,
    script:
        "../scripts/env.py"
