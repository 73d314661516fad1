"""The sweep.yaml JSON Schema, built from the pydantic models in ``tuner/_config.py``.

The section models (``scheduler``, ``provider``, ``profile``) give their own schemas; the top
level is built from ``SweepConfig``'s fields, written in their file form where the file says
them otherwise (``budget: {time, cost}``, ``segment_timeout``, the ``space`` entries). Each
field's description is the comment above it in the model (or beside it).

    python docs/_gen/sweep_schema.py          # rewrite docs/sweep.schema.json
    python docs/_gen/sweep_schema.py --check  # exit 1 if it is not current
"""

from __future__ import annotations

import ast
import inspect
import io
import json
import re
import sys
import textwrap
import tokenize
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from tuner import _config, _duration, _logger_config, _space

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_PATH = ROOT / "docs" / "sweep.schema.json"
SECTIONS = {"scheduler": _config.SchedulerConfig, "provider": _config.ProviderConfig,
            "profile": _config.ProfileConfig}


def field_comments(model: type) -> dict[str, str]:
    """Each field's comment in the model's source: the comment block right above it, or the
    comment on its lines. A block also describes the uncommented fields right below it that
    it names (``# ... where checkpoints live ..., what pip installs ...`` above ``storage``,
    ``install``), or all of them when it is a label of a few words (``# aws only``)."""
    source = textwrap.dedent(inspect.getsource(model))
    lines = source.splitlines()
    comments: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.string.lstrip("#").strip()
    body = ast.parse(source).body[0]
    assert isinstance(body, ast.ClassDef)
    own: dict[str, str] = {}
    block = ""   # the last comment block above a field, while no blank line has followed
    for node in body.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        name = node.target.id
        if name not in model.model_fields:
            continue
        above: list[str] = []
        line = node.lineno - 1
        while line >= 1 and lines[line - 1].strip().startswith("#"):
            above.insert(0, comments[line])
            line -= 1
        beside = [comments[n] for n in range(node.lineno, node.end_lineno + 1) if n in comments]
        if above:
            block = " ".join(above)
        elif line >= 1 and not lines[line - 1].strip():
            block = ""
        text = " ".join(above + beside)
        if not text and block and (len(block.split()) <= 3
                                   or re.search(rf"\b{re.escape(name)}", block)):
            text = block
        if text:
            own[model.model_fields[name].alias or name] = text   # (as the file spells it)
    return own


def _with_descriptions(schema: dict[str, Any], model: type) -> dict[str, Any]:
    own = field_comments(model)
    for name, prop in schema["properties"].items():
        prop.pop("title", None)
        if name in own:
            prop["description"] = own[name]
    schema.pop("title", None)
    return schema


def _section(model: type) -> dict[str, Any]:
    schema = _with_descriptions(model.model_json_schema(), model)
    if model is _config.ProfileConfig:
        # The file may give one boot latency as a number (see ProfileConfig._boot_range).
        prop = schema["properties"]["boot_s"]
        prop["anyOf"].insert(0, {"type": "number", "minimum": 0})
    return schema


def _duration_schema(description: str) -> dict[str, Any]:
    return {"anyOf": [{"type": "number", "exclusiveMinimum": 0}, {"type": "string"}],
            "description": f"{description} ({_duration._DURATION_HELP})"}


def _money_schema(description: str) -> dict[str, Any]:
    return {"anyOf": [{"type": "number", "exclusiveMinimum": 0}, {"type": "string"}],
            "description": f'{description} (US dollars as a number, e.g. 2.5 or "$2.50")'}


# Other spellings the top level accepts (``_config._ALSO_ACCEPTED``), in the file too.
ALSO = {
    "time_budget": "budget.time",
    "time_budget_s": "budget.time",
    "cost_budget": "budget.cost",
    "cost_budget_usd": "budget.cost",
    "segment_timeout_s": "segment_timeout",
}


def _space_entry() -> dict[str, Any]:
    """One entry of ``space``, as ``tuner._space.parse_space`` reads it."""
    scalar = {"type": ["number", "string", "boolean", "null"]}
    # Float bounds may be numeric strings (PyYAML reads 1e-4 as one); integer bounds may not.
    number = {"type": ["number", "string"]}
    integer = {"type": "integer"}

    def bounds(keys: set[str], bound: dict[str, Any]) -> dict[str, Any]:
        props = {k: {"type": "boolean"} if k == "log" else bound for k in sorted(keys)}
        pair = {"type": "array", "minItems": 2, "maxItems": 2, "items": bound}
        return {"anyOf": [pair, {"type": "object", "properties": props,
                                 "required": ["low", "high"], "additionalProperties": False}]}

    kinds = []
    for kind in _space.KINDS:
        if kind in ("choice", "grid"):
            arg: dict[str, Any] = {"type": "array", "minItems": 1, "items": scalar}
        else:
            keys = _space._STEP_KEYS if kind in ("int", "float") else _space._RANGE_KEYS
            arg = bounds(keys, integer if kind in ("randint", "int") else number)
        kinds.append({"type": "object", "properties": {kind: arg}, "required": [kind],
                      "additionalProperties": False})
    return {"anyOf": [{"type": ["number", "string", "boolean"]}, *kinds],
            "description": "a distribution ({" + "|".join(_space.KINDS) + ": ...}) or a "
                           "fixed value passed to every trial as it is"}


def _top_level() -> dict[str, Any]:
    """The top-level keys a sweep file holds, from SweepConfig's fields."""
    fields = _config.SweepConfig.model_fields
    own = field_comments(_config.SweepConfig)
    props: dict[str, Any] = {}
    for key in _config.TOP_LEVEL_KEYS:
        if key in SECTIONS:
            props[key] = {"$ref": f"#/$defs/{key}"}
            if key != "scheduler":   # a missing or null section takes the defaults
                props[key] = {"anyOf": [props[key], {"type": "null"}]}
            if key == "provider":    # `provider: aws` is {type: aws}
                kind = _config.ProviderConfig.model_json_schema()["properties"]["type"]
                props[key]["anyOf"].append({"type": "string", "enum": kind["enum"],
                                            "description": "the provider type alone"})
        elif key == "budget":
            props[key] = {
                "type": "object", "additionalProperties": False,
                "description": "give time, cost or both",
                "properties": {"time": _duration_schema("the deadline"),
                               "cost": _money_schema("the cap")}}
        elif key == "segment_timeout":
            props[key] = _duration_schema(own["segment_timeout_s"])
        elif key == "trainable":
            props[key] = {"type": "string", "pattern": f"^{_config._TRAINABLE.pattern}$",
                          "description": "the trainable's import path, package.module:function"}
        elif key == "name":
            props[key] = {"type": "string", "pattern": f"^{_config._NAME.pattern}$",
                          "description": "the experiment's name (default: from the trainable)"}
        elif key == "sampler":
            props[key] = {"enum": list(_config.SAMPLERS), "default": "tpe"}
        elif key == "space":
            props[key] = {"type": "object", "minProperties": 1,
                          "additionalProperties": _space_entry()}
        elif key == "loggers":
            props[key] = _loggers(own[key])
        else:
            info = fields[key]
            # Field constraints (ge, le, min_length ...) live in the field's metadata.
            prop = TypeAdapter(_annotated(info.annotation, info.metadata)).json_schema()
            if not info.is_required():
                prop["default"] = info.get_default()
            if key in own:
                prop["description"] = own[key]
            props[key] = prop
    for key in _config._ALSO_ACCEPTED:
        if key in ALSO:
            same = ALSO[key]
            like = (props["budget"]["properties"][same.split(".")[1]] if "." in same
                    else props[same])
            props[key] = {**like, "description": f"another spelling of {same}"}
        elif key == "base_dir":
            props[key] = {"type": "string", "description": "where relative imports resolve "
                          "from (default: the sweep file's directory)"}
        else:
            raise ValueError(f"{key}: a spelling the schema does not know yet")
    return props


def _loggers(description: str) -> dict[str, Any]:
    """``loggers``: a list of trackers, each by name or as ``{name: {options}}``."""
    names = list(_logger_config.LOGGER_NAMES)
    with_options = [{"type": "object", "properties": {name: {"anyOf": [
                        {"$ref": f"#/$defs/loggers-{name}"}, {"type": "null"}]}},
                     "required": [name], "additionalProperties": False} for name in names]
    return {"anyOf": [{"type": "array", "items": {"anyOf": [
                {"enum": names, "description": "a tracker by name, with its defaults"},
                *with_options]}}, {"type": "null"}],
            "default": [], "description": description}


def _annotated(annotation: Any, metadata: list[Any]) -> Any:
    from typing import Annotated

    return Annotated[annotation, *metadata] if metadata else annotation


def sweep_schema() -> dict[str, Any]:
    """The JSON Schema of a sweep file."""
    required = [k for k in _config.TOP_LEVEL_KEYS
                if k in _config.SweepConfig.model_fields
                and _config.SweepConfig.model_fields[k].is_required() and k != "name"]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "elastune sweep",
        "description": "A sweep file (sweep.yaml) of elastune, as elastune run reads it. "
                       "Generated from tuner/_config.py by docs/_gen/sweep_schema.py.",
        "type": "object",
        "properties": _top_level(),
        "required": required,
        "additionalProperties": False,
        "$defs": {**{key: _section(model) for key, model in SECTIONS.items()},
                  **{f"loggers-{name}": _section(model)
                     for name, model in _logger_config.OPTIONS.items()}},
    }


def _type(prop: dict[str, Any]) -> str:
    if "$ref" in prop:
        name = prop["$ref"].rsplit("/", 1)[1]
        return f"[{name}](#{name})"
    if "anyOf" in prop:
        return " or ".join(_type(p) for p in prop["anyOf"])
    if "enum" in prop:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in prop["enum"])
    if "const" in prop:
        return f"`{json.dumps(prop['const'])}`"
    kind = prop.get("type", "any")
    kind = " or ".join(kind) if isinstance(kind, list) else kind
    if kind == "array":
        if "prefixItems" in prop:
            return "[" + ", ".join(_type(p) for p in prop["prefixItems"]) + "]"
        return f"list of {_type(prop.get('items', {}))}"
    if kind == "object" and "additionalProperties" in prop and prop["additionalProperties"]:
        return "mapping"
    if kind == "object" and len(prop.get("required", [])) == 1 and len(prop["properties"]) == 1:
        (name,) = prop["required"]     # (a name and its options: a tracker of `loggers`)
        refs = [p["$ref"].rsplit("/", 1)[1] for p in prop["properties"][name]["anyOf"]
                if "$ref" in p]
        return f"`{{{name}: options}}` ([options](#{refs[0]}))"
    limits = [f"{sign} {_number(prop[key])}" for key, sign in (
        ("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="),
        ("exclusiveMaximum", "<")) if key in prop]
    if "minLength" in prop:
        limits.append("not empty")
    if "pattern" in prop:
        limits.append(f"`{prop['pattern']}`")
    return kind + (f" ({', '.join(limits)})" if limits else "")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _text(text: str) -> str:
    """A docstring or comment as Markdown: reST literals become code spans."""
    return re.sub(r"``([^`]+)``", r"`\1`", " ".join(text.split())).replace("|", "\\|")


def _table(schema: dict[str, Any], required: list[str]) -> list[str]:
    rows = ["| key | type | default | what |", "|---|---|---|---|"]
    for key, prop in schema["properties"].items():
        default = ("required" if key in required else
                   f"`{json.dumps(prop['default'])}`" if "default" in prop else "")
        rows.append(f"| `{key}` | {_type(prop)} | {default} | "
                    f"{_text(prop.get('description', ''))} |")
    return [*rows, ""]


def reference_markdown(schema: dict[str, Any] | None = None) -> str:
    """The tables of the sweep.yaml reference: the top level and each section."""
    schema = schema or sweep_schema()
    lines = ["## Top level", "", *_table(schema, schema["required"])]
    for key, section in schema["$defs"].items():
        lines += [f"## {key}", "", _text(section.get("description", "")), "",
                  *_table(section, section.get("required", []))]
    return "\n".join(lines)


def schema_text() -> str:
    return json.dumps(sweep_schema(), indent=2) + "\n"


def main(argv: list[str]) -> int:
    text = schema_text()
    if "--check" in argv:
        current = SCHEMA_PATH.exists() and SCHEMA_PATH.read_text() == text
        if not current:
            print(f"{SCHEMA_PATH} is not current: run python docs/_gen/sweep_schema.py",
                  file=sys.stderr)
        return 0 if current else 1
    SCHEMA_PATH.write_text(text)
    print(f"wrote {SCHEMA_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
