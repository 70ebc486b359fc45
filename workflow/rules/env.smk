rule env:
    """Provenance: versions, processor, GPU and driver, git commit, config hash."""
    output:
        f"{RESULTS}/env.json",
    log:
        f"{RESULTS}/logs/env.log",
    conda:
        "../../envs/attnio.yaml"
    params:
        device=DEVICE,
        config=config,
    script:
        "../scripts/env.py"
