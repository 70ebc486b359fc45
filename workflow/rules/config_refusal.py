"""A configuration off its schema, refused in one line: where the value sits (a grid of the
sweep by its index), the value, what is wrong with it and what the schema allows there.

Snakemake's own validation prints the failing part of the schema and the error's path in
jsonschema's notation over a dozen lines; the Snakefile asks this module first, and raises
its one line as a WorkflowError. Pure Python (jsonschema), so that the suite checks the
wording in-process; the workflow imports it as it imports snakemake_internals (Snakemake puts
this folder on sys.path for the .smk files beside it).
"""

from __future__ import annotations

import jsonschema

LONGEST_VALUE = 80  # characters of a refused value shown; longer ones are cut


def dotted(keys) -> str:
    """limits.call_seconds, sweep[1].tokens[0]: where a value sits."""
    text = ""
    for key in keys:
        text += f"[{key}]" if isinstance(key, int) else f".{key}" if text else str(key)
    return text or "the top level"


def where(keys: list, sweep) -> str:
    """The value's place, a grid of a list of grids by its index (``sweep grid 1: tokens[0]``)."""
    if len(keys) >= 2 and keys[0] == "sweep" and isinstance(sweep, list) and isinstance(keys[1], int):
        rest = keys[2:]
        return f"sweep grid {keys[1]}" + (f": {dotted(rest)}" if rest else "")
    return dotted(keys)


def _number(value: int | float) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


def _word(value) -> str:
    """A value as the configuration's YAML writes it (true, null, 65,535, float16)."""
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    return _number(value) if isinstance(value, (int, float)) else str(value)


def _value(value) -> str:
    """A refused value, strings quoted, cut at LONGEST_VALUE characters."""
    text = repr(value) if isinstance(value, (str, list, dict)) else _word(value)
    return text if len(text) <= LONGEST_VALUE else text[: LONGEST_VALUE - 1] + "…"


def _bounds(schema: dict) -> str:
    said = [
        f"{sign} {_number(schema[key])}"
        for key, sign in (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"))
        if key in schema
    ]
    return " " + ", ".join(said) if said else ""


def _array(schema: dict) -> str:
    items = schema.get("items")
    if not isinstance(items, dict):
        return "a list"
    least, most = schema.get("minItems"), schema.get("maxItems")
    count = f"{least} " if least and least == most else ""
    distinct = "distinct " if schema.get("uniqueItems") else ""
    return f"a list of {count}{distinct}values, each {allowed(items)}"


def allowed(schema: dict) -> str:
    """What a part of the schema allows, in words (``an integer ≥ 1, ≤ 65,535 or null``)."""
    if "enum" in schema:
        return "one of " + ", ".join(_word(v) for v in schema["enum"])
    if "$ref" in schema:  # a part the schema names (#/$defs/grid: a grid)
        return f"a {schema['$ref'].rsplit('/', 1)[-1]}"
    kinds = schema.get("type", "array" if "items" in schema else [])
    words = []
    for kind in [kinds] if isinstance(kinds, str) else kinds:
        if kind in ("integer", "number"):
            words.append(f"{'an integer' if kind == 'integer' else 'a number'}{_bounds(schema)}")
        elif kind == "array":
            words.append(_array(schema))
        elif kind == "object":
            keys = ", ".join(schema.get("properties", {}))
            words.append(f"a mapping of {keys}" if keys else "a mapping")
        elif kind == "string":
            pattern = schema.get("pattern")
            words.append(f"a string matching {pattern}" if pattern else "a string")
        else:
            words.append({"boolean": "true or false", "null": "null"}.get(kind, kind))
    return " or ".join(words) or "what the schema describes"


# the errors allowed() says all of; the others keep jsonschema's words beside it
SAID_BY_ALLOWED = ("enum", "type", "minimum", "exclusiveMinimum", "maximum", "pattern")


def describe(error: jsonschema.ValidationError, sweep=None) -> str:
    """One line for one schema error: where, the value, what is wrong and what is allowed."""
    keys = list(error.absolute_path)
    place = where(keys, sweep)
    if error.validator == "additionalProperties":
        known = list(error.schema.get("properties", {}))
        extra = ", ".join(sorted(map(str, set(error.instance) - set(known))))
        return f"{place} has no key {extra}; its keys are {', '.join(known)}"
    if error.validator == "required":
        return f"{place}: {error.message}"
    wrong = "" if error.validator in SAID_BY_ALLOWED else f" ({error.message})"
    return f"{place} = {_value(error.instance)} is not allowed{wrong}; it takes {allowed(error.schema)}"


def refusal(config: dict, schema: dict) -> str | None:
    """The one-line refusal of ``config`` against ``schema`` (None where it holds): the error
    jsonschema ranks most relevant, as Snakemake's validation would have raised it."""
    validator = jsonschema.validators.validator_for(schema)(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(config))
    if error is None:
        return None
    return f"config: {describe(error, config.get('sweep') if isinstance(config, dict) else None)}"
