# Snakemake's own message for a config file that is empty, not a mapping or not YAML does
# not say which file it means; this check of the workflow's config file does. (Files given
# with --configfile are read by Snakemake before this Snakefile runs: snakemake#2439.)
#
# Every config file (the workflow's and those given with --configfile) and --config are
# also refused, before any job and naming the key and the file, where they hold what YAML
# and the schema let through silently: a key given twice (YAML keeps the last), a number
# that is not finite (.nan, .inf: no comparison in the schema catches them), and a float
# where the schema asks for an integer (3.0: JSON Schema counts it as an integer, but the
# command line and the planner take integers only).
import functools
import math
import os

import jsonschema
import yaml
from snakemake.exceptions import WorkflowError

import snakemake_internals
from config_refusal import dotted, refusal

CONFIG_SCHEMA = os.path.join(workflow.basedir, "workflow", "schemas", "config.schema.yaml")


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
    refuse_duplicate_keys(path)
    refuse_silent_values(content, f"config file {path}")
    return path


def refuse_duplicate_keys(path):
    """A key written twice in one mapping of the file, named with both lines."""
    try:
        with open(path, encoding="utf-8") as stream:
            root = yaml.compose(stream, Loader=yaml.SafeLoader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return  # Snakemake (or checked_config_file) says what is wrong with it
    stack = [(root, [])]
    while stack:
        node, keys = stack.pop()
        if isinstance(node, yaml.SequenceNode):
            stack += [(item, keys + [i]) for i, item in enumerate(node.value)]
        if not isinstance(node, yaml.MappingNode):
            continue
        seen = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag.endswith(":merge"):
                continue
            name = (key_node.tag, key_node.value)
            line = key_node.start_mark.line + 1
            if name in seen:
                raise WorkflowError(
                    f"config file {path}: the key {dotted(keys + [key_node.value])} is given "
                    f"twice (lines {seen[name]} and {line}); YAML would silently keep the "
                    "last: give each key once"
                )
            seen[name] = line
            stack.append((value_node, keys + [key_node.value]))


def schema_refusal(config):
    """The merged configuration's one-line refusal against the schema (None where it holds):
    where the value sits, a grid of the sweep by its index, and what is allowed there, before
    Snakemake's validation (which fills the defaults) would print a dozen lines of schema."""
    return refusal(config, config_schema())


@functools.cache
def config_schema():
    """workflow/schemas/config.schema.yaml, read once (libyaml where it is: our own file)."""
    with open(CONFIG_SCHEMA, encoding="utf-8") as stream:
        return yaml.load(stream, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


_STRICT = []  # the validator, made once per run: every config file and --config use it


def _strict_integers():
    """The schema's validator, with integers that are ints (not 3.0) and enums that match
    in type as well as value (16.0 is not 16, True is not 1)."""
    if not _STRICT:
        _STRICT.append(_strict_validator())
    return _STRICT[0]


def _strict_validator():
    schema = config_schema()
    base = jsonschema.validators.validator_for(schema)
    checker = base.TYPE_CHECKER.redefine("integer", lambda _, value: type(value) is int)

    def enum(validator, allowed, instance, _schema):
        if not any(type(instance) is type(a) and instance == a for a in allowed):
            yield jsonschema.ValidationError(f"{instance!r} is not one of {allowed}")

    strict = jsonschema.validators.extend(base, validators={"enum": enum}, type_checker=checker)
    return strict(schema)


def refuse_silent_values(content, source):
    """A number that is not finite anywhere, or a float where the schema asks for an
    integer, named with its key and where it was given."""
    stack = [(content, [])]
    while stack:
        value, keys = stack.pop()
        if isinstance(value, dict):
            stack += [(v, keys + [k]) for k, v in value.items()]
        elif isinstance(value, list):
            stack += [(v, keys + [i]) for i, v in enumerate(value)]
        elif isinstance(value, float) and not math.isfinite(value):
            raise WorkflowError(f"{source}: {dotted(keys)} = {value}: must be a finite number")
    for error in _strict_integers().iter_errors(content):
        value = error.instance
        wanted = error.validator_value
        if not isinstance(value, float) or not (
            error.validator == "enum" or error.validator == "type" and "integer" in wanted
        ):
            continue  # Snakemake's validation of the whole config names the others
        allowed = (
            "an integer"
            if error.validator == "type"
            else f"one of {', '.join(map(str, error.validator_value))}"
        )
        hint = f": write {int(value)}" if value.is_integer() else ""
        raise WorkflowError(
            f"{source}: {dotted(error.absolute_path)} = {value!r} must be {allowed}{hint}"
        )


def check_command_line_config():
    """The files given with --configfile and the values of --config, which Snakemake has
    read before this file runs."""
    paths = snakemake_internals.command_line_configfiles(workflow)
    values = snakemake_internals.command_line_config(workflow)
    for path in paths:
        if not os.path.exists(path):
            continue
        refuse_duplicate_keys(path)
        try:
            with open(path, encoding="utf-8") as stream:
                content = yaml.safe_load(stream)
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue  # not YAML: Snakemake read it as JSON, or says what is wrong
        if isinstance(content, dict):
            refuse_silent_values(content, f"config file {path}")
    refuse_silent_values(values, "--config")


check_command_line_config()
