# Snakemake's own message for a config file that is empty, not a mapping or not YAML does
# not say which file it means; this check of the workflow's config file does. (Files given
# with --configfile are read by Snakemake before this Snakefile runs: snakemake#2439.)
import os

import yaml
from snakemake.exceptions import WorkflowError


def checked_config_file(path):
    """The path, once its file (where it exists) is known to hold a YAML mapping."""
    if not os.path.exists(path):
        return path
    try:
        with open(path, encoding="utf-8") as stream:
            content = yaml.safe_load(stream)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise WorkflowError(f"config file {path} is not YAML: {err}") from None
    if content is None:
        raise WorkflowError(f"config file {path} is empty: it must hold a mapping of settings")
    if not isinstance(content, dict):
        kind = type(content).__name__
        raise WorkflowError(f"config file {path} holds a {kind}, not a mapping of settings")
    return path
