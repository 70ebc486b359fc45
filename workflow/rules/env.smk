rule env:
    """Provenance: versions, processor, GPU and driver, git commit, config hash."""
    output:
        f"{RESULTS}/env.json",
    log:
        f"{RESULTS}/logs/env.log",
    params:
        device=DEVICE,
        config=config,
    conda:
        "../../envs/attnio.yaml"
    script:
        "../scripts/env.py"
