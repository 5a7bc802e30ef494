"""The tools' input schemas, derived from the runbooks: each runbook's parameters with the JSON type
its declared ``type`` (engine/params.py) takes, and nothing else accepted.

Runbooks are read here as YAML only (the same guarded loader validation uses), so that listing the
tools answers at once; a call loads and validates the runbook it names before anything runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# A parameter's declared type -> the JSON Schema of the value a model may give (null: no value).
_JSON_TYPES: dict[str, dict[str, Any]] = {
    "string": {"type": ["string", "null"]},
    "path": {"type": ["string", "null"], "pattern": "^[^@\\-\\n\\r][^\\n\\r]*$"},
    "url": {"type": ["string", "null"], "pattern": "^[Hh][Tt][Tt][Pp][Ss]?://\\S+$"},
    "json": {"type": ["string", "null"], "description": "JSON text"},
    "integer": {"type": ["integer", "string", "null"]},
    "number": {"type": ["number", "string", "null"]},
    "boolean": {"type": ["boolean", "string", "null"]},
    "yaml": {"type": ["object", "array", "string", "null"]},
}
# Types whose value must be text: anything else would reach a collector's argv unchecked.
TEXT_TYPES = frozenset({"string", "path", "url", "json"})


def runbook_parameters(library: Any = None) -> dict[str, dict[str, Any]]:
    """Runbook name -> {title, description, scope, parameters: {name: {type, default, description}}}."""
    from nightowl.engine.params import declared_type
    from nightowl.engine.yaml_lines import YamlError, load_with_lines
    from nightowl.library import runbooks

    found: dict[str, dict[str, Any]] = {}
    for name, path in (library or runbooks.RunbookLibrary()).all_paths().items():
        try:
            data = load_with_lines(path.read_text(encoding="utf-8"))[0] or {}
        except (OSError, UnicodeDecodeError, YamlError) as exc:
            found[name] = {"title": None, "error": f"{path.name}: {exc}", "parameters": {}}
            continue
        data = data if isinstance(data, dict) else {}
        given = data.get("parameters")
        declared: dict[Any, Any] = given if isinstance(given, dict) else {}
        parameters = {}
        for pname, spec in declared.items():
            spec = spec if isinstance(spec, dict) else {}
            default = spec.get("default")
            parameters[str(pname)] = {
                "type": declared_type(spec.get("type"), default),
                "default": default,
                "description": str(spec.get("description") or ""),
            }
        found[name] = {
            "title": data.get("title"),
            "description": data.get("description") or "",
            "scope": data.get("scope") or "host",
            "parameters": parameters,
        }
    return found


def params_schema(parameters: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The ``params`` object one runbook accepts: its declared parameters, typed; no other key."""
    properties = {}
    for name, spec in parameters.items():
        prop = dict(_JSON_TYPES.get(spec["type"], _JSON_TYPES["string"]))
        prop["description"] = f"{spec['type']}: {spec['description']}".strip(": ")
        if spec["default"] is not None:
            prop["default"] = spec["default"]
        properties[name] = prop
    return object_schema(properties)


def object_schema(properties: dict[str, Any], required: Sequence[str] = ()) -> dict[str, Any]:
    """An object with these properties, the ``required`` ones given, and no other key."""
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    schema["additionalProperties"] = False
    return schema


def runbook_argument(runbooks: dict[str, dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``runbook`` and ``params`` properties: ``params`` is one of the runbooks' parameter objects
    (``anyOf``, each titled with its runbook; nightowl checks at the call that it is the named runbook's).

    Nothing is tied at the top level (``allOf``/``if``): function-calling APIs that models are driven
    through refuse a schema with those at its root."""
    names = sorted(runbooks)
    runbook = {
        "type": "string",
        "enum": names,
        "description": "runbook name (list_runbooks describes each): "
        + "; ".join(f"{n}: {runbooks[n].get('title') or ''}" for n in names),
    }
    params = {
        "type": "object",
        "description": "parameters of the runbook named, by name, typed as it declares (list_runbooks); "
        "an undeclared name is an error",
        "anyOf": [
            {"title": name, **params_schema(runbooks[name]["parameters"])}
            for name in names
            if runbooks[name]["parameters"]
        ],
    }
    return runbook, params


def check_arguments(tool: str, schema: dict[str, Any], arguments: dict[str, Any]) -> None:
    """The top-level checks a model's arguments must pass before any work: no unknown argument, every
    required one given, each of the JSON type declared. Raises ValueError naming the argument."""
    properties: dict[str, Any] = schema.get("properties", {})
    unknown = sorted(set(arguments) - set(properties))
    if unknown:
        known = ", ".join(sorted(properties)) or "none"
        raise ValueError(f"tool {tool} has no argument {', '.join(unknown)} (its arguments: {known})")
    for name in schema.get("required", []):
        if arguments.get(name) is None:
            raise ValueError(f"tool {tool} needs the argument {name}")
    for name, value in arguments.items():
        if value is None:
            continue
        kind = properties[name].get("type")
        items = properties[name].get("items", {}).get("type")
        if not _is(kind, value) or (kind == "array" and items and not all(_is(items, v) for v in value)):
            want = f"a list of {items}s" if kind == "array" else f"a {kind}"
            raise ValueError(f"argument {name} of tool {tool} expects {want}, got {value!r}"[:300])


def _is(kind: Any, value: Any) -> bool:
    checks = {
        "string": lambda v: isinstance(v, str),
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "array": lambda v: isinstance(v, list),
        "object": lambda v: isinstance(v, dict),
        "boolean": lambda v: isinstance(v, bool),
    }
    return kind is None or checks.get(kind, lambda v: True)(value)


def check_param_values(runbook: str, parameters: dict[str, dict[str, Any]], values: dict[str, Any]) -> None:
    """A text-typed parameter (string, path, url, json) must be given as text: a list or mapping would
    reach a collector's argv without the checks engine/params.py makes on text."""
    for name, value in values.items():
        spec = parameters.get(name)
        if spec and spec["type"] in TEXT_TYPES and value is not None and not isinstance(value, str):
            raise ValueError(f"parameter {name} of runbook {runbook} expects text ({spec['type']}), got {value!r}")
