"""Inventories: which hosts a sweep covers.

Three formats, read as they are:

* nightowl YAML: ``hosts:`` a list of host specs (``gpu-01``, ``ssh://root@gpu-02:2222``) or
  mappings ``{name, address, port, user, labels, profile, jump, identity_file}``, with an
  optional ``defaults:`` mapping of the same keys (except name/address);
* Ansible YAML (``all: {hosts: ..., children: ..., vars: ...}``) and
* Ansible INI (``[group]``, ``[group:vars]``, ``[group:children]``), because many GPU teams
  already keep one, and
* Ansible's inventory JSON: what ``ansible-inventory -i SOURCE --list [--export]`` prints and
  dynamic inventory scripts return (groups with ``hosts``/``children`` lists and ``vars``, or
  a bare host list; ``_meta.hostvars`` per host), so cloud plugins and group_vars work without
  importing Ansible (docs.ansible.com, "Developing dynamic inventory": inventory script
  conventions, and ``ansible-inventory --help``). ``ansible_host``/``_port``/``_user``/``_ssh_private_key_file`` and a
  ``-J``/``ProxyJump`` in ``ansible_ssh_common_args`` are honoured; group membership becomes
  ``HostSpec.groups`` (selected with ``group=NAME``); ``nightowl_profile`` and
  ``nightowl_labels`` set the profile and labels. Host ranges (``gpu-[01:16]``) expand.

Failure domains (``HostSpec.domains``, nightowl/fleet/domains.py): the ``rack`` and ``switch``
variables (Ansible host or group vars; nightowl YAML labels) and any variable named in a
``domains:`` list (a top-level key of nightowl YAML, an Ansible var such as ``all: vars:``).

Every error names the file and line. Plain names resolve through the SSH client config,
as ``ssh`` would resolve them.
"""

from __future__ import annotations

import ast
import re
import shlex
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from nightowl.engine.yaml_lines import YamlError, line_of, load_with_lines
from nightowl.fleet.domains import domain_keys
from nightowl.transports.hostspec import HostSpec, host_spec_parser, local_spec, written_host

MAPPING_KEYS = frozenset({"name", "address", "port", "user", "labels", "profile", "jump", "identity_file"})
DEFAULT_KEYS = MAPPING_KEYS - {"name", "address"}
# Ansible variables we read, with their older ansible_ssh_* spellings (Ansible docs,
# "Connecting to hosts: behavioral inventory parameters").
ANSIBLE_ALIASES = {
    "address": ("ansible_host", "ansible_ssh_host"),
    "port": ("ansible_port", "ansible_ssh_port"),
    "user": ("ansible_user", "ansible_ssh_user"),
    "identity_file": ("ansible_ssh_private_key_file", "ansible_private_key_file"),
    "ssh_args": ("ansible_ssh_common_args", "ansible_ssh_extra_args"),
    "connection": ("ansible_connection",),
    "profile": ("nightowl_profile",),
    "labels": ("nightowl_labels",),
}
IMPLICIT_GROUPS = frozenset({"all", "ungrouped"})
# gpu-[01:16], rack[a:f], node[0:30:10] (Ansible "Adding ranges of hosts").
_RANGE_RE = re.compile(r"\[([0-9]+|[a-zA-Z]):([0-9]+|[a-zA-Z])(?::([0-9]+))?\]")
_INI_SECTION_RE = re.compile(r"^\[([^\[\]:\s]+)(?::(vars|children))?\]$")
_MAX_RANGE = 100_000


class InventoryError(ValueError):
    """An inventory problem; the message starts with ``file:line:``."""


@dataclass
class _Entry:
    """One host as an inventory describes it, before resolution."""

    name: str
    line: int | None
    values: dict[str, Any] = field(default_factory=dict)
    groups: list[str] = field(default_factory=list)


def load_inventory(path: Path, ssh_config: Path | None = None, lenient: bool = False) -> list[HostSpec]:
    """Hosts of a nightowl YAML, Ansible YAML or Ansible INI inventory, in file order.

    An inventory nested past what the readers can walk (JSON or groups thousands deep) is an
    InventoryError naming the file, never a RecursionError.

    ``lenient`` (a sweep): a host whose spec cannot be parsed is kept, with ``problem`` saying why
    (file and line), so it is reported unreachable and the others are swept; otherwise it is an
    InventoryError. The shape of the file itself is always an InventoryError."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InventoryError(f"{path}: cannot read inventory: {exc}") from None
    try:
        return _load(path, text, ssh_config, lenient)
    except RecursionError:
        raise InventoryError(f"{path}: nested too deeply to read (JSON objects or groups within groups)") from None


def _load(path: Path, text: str, ssh_config: Path | None, lenient: bool) -> list[HostSpec]:
    where = _Where(path, lenient=lenient)
    if _looks_like_ini(text):
        return _resolve_entries(_ansible_ini(text, where), where, ssh_config)
    if text.lstrip().startswith("{"):
        return _resolve_entries(_ansible_json(_json_document(text, where), where), where, ssh_config)
    try:
        data, where.lines = load_with_lines(text)
    except YamlError as exc:
        if "=" not in _first_line(text):
            raise InventoryError(where.at(exc.line, exc.message)) from None
        data = text  # `gpu-01 ansible_host=10.0.0.1` lines with no section: Ansible INI
    if isinstance(data, str):  # bare host lines are a YAML scalar but an INI inventory
        entries = _ansible_ini(text, where)
    elif isinstance(data, dict) and isinstance(data.get("hosts"), list):
        return _nightowl_yaml(data, where, ssh_config)
    elif isinstance(data, dict) and "_meta" in data:
        entries = _ansible_json(data, where)
    elif isinstance(data, dict) and data:
        entries = _ansible_yaml(data, where)
    else:
        raise InventoryError(where.at(1, "expected `hosts:` (a list) or Ansible groups such as `all:`"))
    return _resolve_entries(entries, where, ssh_config)


def limit(hosts: list[HostSpec], pattern: str) -> list[HostSpec]:
    """Hosts matching ``pattern``: comma-separated terms, each a name glob, ``label=value``
    (``group=NAME``, ``profile=GLOB`` too), or ``!term`` to exclude. Order is kept."""
    terms = [t.strip() for t in pattern.split(",") if t.strip()]
    if not terms:
        raise ValueError("empty --limit pattern")
    include = [t for t in terms if not t.startswith("!")]
    exclude = [t[1:] for t in terms if t.startswith("!")]
    chosen = []
    for host in hosts:
        wanted = not include or any(_matches(host, t) for t in include)
        if wanted and not any(_matches(host, t) for t in exclude):
            chosen.append(host)
    return chosen


def _matches(host: HostSpec, term: str) -> bool:
    if "=" in term:
        key, _, value = term.partition("=")
        key = key.strip()
        if key == "group":
            return any(fnmatchcase(g, value) for g in host.groups)
        if key == "profile":
            return host.profile is not None and fnmatchcase(host.profile, value)
        label = host.labels.get(key)
        return label is not None and fnmatchcase(label, value)
    return fnmatchcase(host.name, term) or term in host.groups


# ---------------------------------------------------------------------------- helpers


@dataclass
class _Where:
    path: Path
    lines: dict[tuple[Any, ...], int] = field(default_factory=dict)
    lenient: bool = False

    def line(self, *key_path: Any) -> int | None:
        return line_of(self.lines, key_path)

    def at(self, line: int | None, message: str) -> str:
        return f"{self.path}:{line}: {message}" if line else f"{self.path}: {message}"


def _first_line(text: str) -> str:
    for raw in text.splitlines():
        line = raw.strip()
        if line and not line.startswith(("#", ";")):
            return line
    return ""


def _looks_like_ini(text: str) -> bool:
    return _INI_SECTION_RE.match(_first_line(text)) is not None


def expand_host_range(pattern: str) -> list[str]:
    """``gpu-[01:03]`` -> gpu-01, gpu-02, gpu-03 (leading zeros kept, as Ansible does)."""
    match = _RANGE_RE.search(pattern)
    if match is None:
        return [pattern]
    start, end, step_text = match.groups()
    step = int(step_text) if step_text else 1
    if start.isdigit() != end.isdigit() or step < 1:
        raise ValueError(f"invalid host range {match.group(0)!r}")
    if start.isdigit():
        width = len(start) if len(start) == len(end) else 0
        values = [str(n).zfill(width) for n in range(int(start), int(end) + 1, step)]
    else:
        values = [chr(c) for c in range(ord(start), ord(end) + 1, step)]
    if not values or len(values) > _MAX_RANGE:
        raise ValueError(f"host range {match.group(0)!r} is empty or too large")
    head, tail = pattern[: match.start()], pattern[match.end() :]
    return [name for value in values for name in expand_host_range(head + value + tail)]


# ---------------------------------------------------------------------------- nightowl YAML


def _nightowl_yaml(data: dict[str, Any], where: _Where, ssh_config: Path | None) -> list[HostSpec]:
    unknown = sorted(set(data) - {"hosts", "defaults", "domains"})
    if unknown:
        raise InventoryError(
            where.at(where.line(unknown[0]), f"unknown key {unknown[0]!r} (expected hosts, defaults, domains)")
        )
    listed = _domain_list(data.get("domains"), where, where.line("domains"))
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise InventoryError(where.at(where.line("defaults"), "`defaults:` must be a mapping"))
    bad = sorted(set(defaults) - DEFAULT_KEYS)
    if bad:
        raise InventoryError(where.at(where.line("defaults", bad[0]), f"unknown default {bad[0]!r}"))
    specs: list[HostSpec] = []
    lines: list[int | None] = []
    written: dict[int, str] = {}  # index -> the spec string of an entry named after its host
    parse = host_spec_parser(ssh_config)
    for index, item in enumerate(data["hosts"]):
        line = where.line("hosts", index)
        if isinstance(item, str):
            values = {**defaults, "address": item, "name": _host_of(item), "_spec": True}
            written[index] = item
        elif isinstance(item, dict):
            bad = sorted(set(item) - MAPPING_KEYS)
            if bad:
                raise InventoryError(where.at(where.line("hosts", index, bad[0]), f"unknown host key {bad[0]!r}"))
            if not item.get("name") and not item.get("address"):
                raise InventoryError(where.at(line, "a host mapping needs `name` or `address`"))
            labels = {**_mapping(defaults, "labels", where, line), **_mapping(item, "labels", where, line)}
            values = {**defaults, **item, "labels": labels}
            values.setdefault("address", values.get("name"))
            if not values.get("name"):
                values["name"] = _host_of(str(values["address"]))
                written[index] = str(values["address"])
            values["name"] = str(values["name"])
        else:
            raise InventoryError(where.at(line, f"a host is a spec string or a mapping, not {type(item).__name__}"))
        values["domains"] = domain_keys(_mapping(values, "labels", where, line), listed)
        specs.append(_build(_Entry(values["name"], line, values), where, parse))
        lines.append(line)
    _no_same_machine(specs, lines, where)
    specs = _unique_names(specs, written)
    _no_duplicates(specs, lines, where)
    return specs


def _host_of(spec: str) -> str:
    """An entry without a name is named after the host its spec names (not the whole spec); a
    malformed spec keeps its text here and is reported, with its line, when it is parsed."""
    try:
        return written_host(spec)
    except ValueError:
        return spec


def _unique_names(specs: list[HostSpec], written: dict[int, str]) -> list[HostSpec]:
    """Two different machines written with the same host (``h:2201``, ``h:2202``) get ``host:port``
    names, or their specs as written when even that collides. A name the inventory gave is never
    changed: one that a spec's host repeats stays a duplicate, reported by ``_no_duplicates``."""
    names = [spec.name for spec in specs]
    derived = Counter(names[index] for index in written)
    clashing = {index: f"{names[index]}:{specs[index].port}" for index in written if derived[names[index]] > 1}
    kept = Counter(name for index, name in enumerate(names) if index not in clashing)
    with_port = Counter(clashing.values())
    for index, candidate in clashing.items():
        names[index] = written[index] if with_port[candidate] > 1 or kept[candidate] else candidate
    return [spec if spec.name == name else replace(spec, name=name) for spec, name in zip(specs, names, strict=True)]


# ---------------------------------------------------------------------------- Ansible


@dataclass
class _Group:
    vars: dict[str, Any] = field(default_factory=dict)
    hosts: dict[str, _Entry] = field(default_factory=dict)
    children: list[str] = field(default_factory=list)
    line: int | None = None


def _ansible_yaml(data: dict[str, Any], where: _Where) -> list[_Entry]:
    groups: dict[str, _Group] = {}
    for name, body in data.items():
        _yaml_group(str(name), body, (name,), groups, where)
    return _flatten_groups(groups, where)


def _yaml_group(name: str, body: Any, key_path: tuple[Any, ...], groups: dict[str, _Group], where: _Where) -> None:
    group = groups.setdefault(name, _Group(line=where.line(*key_path)))
    if body is None:
        return
    if not isinstance(body, dict):
        raise InventoryError(where.at(where.line(*key_path), f"group {name!r} must be a mapping"))
    unknown = sorted(set(body) - {"hosts", "children", "vars"})
    if unknown:
        line = where.line(*key_path, unknown[0])
        raise InventoryError(where.at(line, f"group {name!r}: unknown key {unknown[0]!r} (hosts, children, vars)"))
    for section in ("hosts", "children", "vars"):
        if body.get(section) is not None and not isinstance(body[section], dict):
            raise InventoryError(
                where.at(where.line(*key_path, section), f"group {name!r}: {section} must be a mapping")
            )
    group.vars.update(body.get("vars") or {})
    for pattern, host_vars in (body.get("hosts") or {}).items():
        line = where.line(*key_path, "hosts", pattern)
        if host_vars is not None and not isinstance(host_vars, dict):
            raise InventoryError(where.at(line, f"host {pattern!r}: variables must be a mapping"))
        _add_hosts(group, str(pattern), dict(host_vars or {}), line, where)
    for child, child_body in (body.get("children") or {}).items():
        group.children.append(str(child))
        _yaml_group(str(child), child_body, (*key_path, "children", child), groups, where)


def _add_hosts(group: _Group, pattern: str, host_vars: dict[str, Any], line: int | None, where: _Where) -> None:
    try:
        names = expand_host_range(pattern)
    except ValueError as exc:
        raise InventoryError(where.at(line, str(exc))) from None
    for name in names:
        entry = group.hosts.setdefault(name, _Entry(name, line))
        entry.values.update(host_vars)


def _ansible_ini(text: str, where: _Where) -> list[_Entry]:
    groups: dict[str, _Group] = {"ungrouped": _Group(line=1)}
    group, section = "ungrouped", "hosts"
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            match = _INI_SECTION_RE.match(line)
            if match is None:
                raise InventoryError(where.at(number, f"invalid section header {line!r}"))
            group, section = match.group(1), match.group(2) or "hosts"
            groups.setdefault(group, _Group(line=number))
            continue
        _ini_line(groups[group], group, section, line, number, groups, where)
    return _flatten_groups(groups, where)


def _ini_line(
    group: _Group, name: str, section: str, line: str, number: int, groups: dict[str, _Group], where: _Where
) -> None:
    if section == "children":
        group.children.append(line.split()[0])
        groups.setdefault(line.split()[0], _Group(line=number))
        return
    if section == "vars":
        key, equals, value = line.partition("=")
        if not equals or not key.strip():
            raise InventoryError(where.at(number, f"[{name}:vars] expects key=value, got {line!r}"))
        group.vars[key.strip()] = _ini_value(value.strip())
        return
    try:
        tokens = shlex.split(line, comments=True)
    except ValueError as exc:
        raise InventoryError(where.at(number, f"cannot read host line: {exc}")) from None
    host_vars: dict[str, Any] = {}
    for token in tokens[1:]:
        key, equals, value = token.partition("=")
        if not equals or not key:
            raise InventoryError(where.at(number, f"expected key=value after the host name, got {token!r}"))
        host_vars[key] = value
    pattern = tokens[0]
    port_match = re.fullmatch(r"(.+?):(\d+)", pattern)
    if port_match and not pattern.startswith("["):
        pattern = port_match.group(1)
        host_vars.setdefault("ansible_port", port_match.group(2))
    _add_hosts(group, pattern, host_vars, number, where)


def _json_document(text: str, where: _Where) -> Any:
    """JSON (an error names its line); lines for later messages from the YAML reader when it can."""
    import json

    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InventoryError(where.at(exc.lineno, f"invalid JSON: {exc.msg} (column {exc.colno})")) from None
    try:
        where.lines = load_with_lines(text)[1]
    except YamlError:
        where.lines = {}
    return data


def _ansible_json(data: Any, where: _Where) -> list[_Entry]:
    """Groups in the order ``all`` lists its children (depth first), then any other group."""
    if isinstance(data, dict) and isinstance(data.get("hosts"), list):
        raise InventoryError(where.at(1, "a JSON inventory is Ansible's (groups and _meta), not `hosts:`"))
    if not isinstance(data, dict):
        raise InventoryError(where.at(1, "expected a JSON object of groups (ansible-inventory --list)"))
    meta = data.get("_meta") or {}
    hostvars = meta.get("hostvars") if isinstance(meta, dict) else None
    if not isinstance(hostvars, dict | None):
        raise InventoryError(where.at(where.line("_meta"), "_meta.hostvars must be an object of host: vars"))
    groups: dict[str, _Group] = {}
    order: list[str] = []

    def visit(name: str) -> None:
        if name in order or name == "_meta" or name not in data:
            return
        order.append(name)
        body = data[name]
        for child in body.get("children") or [] if isinstance(body, dict) else []:
            visit(str(child))

    for name in ["all", *data]:
        visit(name)
    groups.update((name, _Group(line=where.line(name))) for name in order)  # hosts come out in this order
    for name in order:
        _json_group(name, data[name], groups, hostvars or {}, where)
    return _flatten_groups(groups, where)


def _json_group(name: str, body: Any, groups: dict[str, _Group], hostvars: dict[str, Any], where: _Where) -> None:
    body = {"hosts": body} if isinstance(body, list) else body  # the pre-1.0 form: a bare host list
    line = where.line(name)
    if not isinstance(body, dict):
        raise InventoryError(where.at(line, f"group {name!r} must be an object or a list of hosts"))
    unknown = sorted(set(body) - {"hosts", "children", "vars"})
    if unknown:
        raise InventoryError(where.at(line, f"group {name!r}: unknown key {unknown[0]!r} (hosts, children, vars)"))
    for section, kind in (("hosts", list), ("children", list), ("vars", dict)):
        if body.get(section) is not None and not isinstance(body[section], kind):
            raise InventoryError(
                where.at(where.line(name, section) or line, f"group {name!r}: {section} must be a {kind.__name__}")
            )
    group = groups.setdefault(name, _Group(line=line))
    group.vars.update(body.get("vars") or {})
    for index, host in enumerate(body.get("hosts") or []):
        host_line = where.line(name, "hosts", index) or line
        own = hostvars.get(str(host)) or {}
        if not isinstance(host, str) or not isinstance(own, dict):
            raise InventoryError(where.at(host_line, f"group {name!r}: host {host!r} must be a name with vars"))
        group.hosts.setdefault(host, _Entry(host, host_line)).values.update(own)
    for child in body.get("children") or []:
        group.children.append(str(child))
        groups.setdefault(str(child), _Group(line=line))


def _ini_value(value: str) -> str:
    """Ansible reads a quoted INI value as the string inside the quotes."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        try:
            return str(ast.literal_eval(value))
        except (ValueError, SyntaxError):
            return value[1:-1]
    return value


def _flatten_groups(groups: dict[str, _Group], where: _Where) -> list[_Entry]:
    """Merge each host's variables: all < parent groups < child groups < the host itself."""
    parents: dict[str, set[str]] = {name: set() for name in groups}
    for name, group in groups.items():
        for child in group.children:
            parents.setdefault(child, set()).add(name)
    depth_cache: dict[str, int] = {}

    def depth(name: str, seen: frozenset[str] = frozenset()) -> int:
        if name in seen:
            raise InventoryError(where.at(groups[name].line, f"group {name!r} is its own ancestor"))
        if name not in depth_cache:
            ups = parents.get(name) or set()
            depth_cache[name] = 0 if name == "all" else 1 + max((depth(p, seen | {name}) for p in ups), default=0)
        return depth_cache[name]

    def ancestors(name: str) -> set[str]:
        found: set[str] = set()
        stack = [name]
        while stack:
            for parent in parents.get(stack.pop(), ()):
                if parent not in found:
                    found.add(parent)
                    stack.append(parent)
        return found

    merged: dict[str, _Entry] = {}
    membership: dict[str, set[str]] = {}
    for name, group in groups.items():
        for host, entry in group.hosts.items():
            first = merged.setdefault(host, _Entry(host, entry.line))
            first.values.update(entry.values)
            membership.setdefault(host, set()).update({name} | ancestors(name))
    result = []
    for host, entry in merged.items():
        member_of = membership[host] | {"all"}
        values: dict[str, Any] = {}
        for group_name in sorted(member_of, key=lambda g: (depth(g), g)):
            values.update(groups[group_name].vars if group_name in groups else {})
        values.update(entry.values)
        result.append(
            _Entry(host, entry.line, _from_ansible(values, where, entry.line), sorted(member_of - IMPLICIT_GROUPS))
        )
    return result


def _from_ansible(values: dict[str, Any], where: _Where | None = None, line: int | None = None) -> dict[str, Any]:
    listed = _domain_list(values.get("domains", values.get("nightowl_domains")), where, line)
    out: dict[str, Any] = {"domains": domain_keys(values, listed)}
    for ours, names in ANSIBLE_ALIASES.items():
        for name in names:
            if values.get(name) not in (None, ""):
                out[ours] = values[name]
                break
    return out


def _domain_list(value: Any, where: _Where | None, line: int | None) -> list[str]:
    """``domains:`` names the variables that are failure domains: a list, or a comma-separated string."""
    if value in (None, ""):
        return []
    if isinstance(value, str):
        return [k.strip() for k in value.split(",") if k.strip()]
    if isinstance(value, list) and all(isinstance(k, str) for k in value):
        return list(value)
    message = "`domains:` must list variable names (a list or a comma-separated string)"
    raise InventoryError(where.at(line, message) if where else message)


def _jump_from_ssh_args(args: str) -> str | None:
    """``-J bastion`` or ``-o ProxyJump=bastion`` inside ansible_ssh_common_args."""
    try:
        tokens = shlex.split(str(args))
    except ValueError:
        return None
    for index, token in enumerate(tokens):
        if token == "-J" and index + 1 < len(tokens):
            return tokens[index + 1]
        if token.startswith("-J") and len(token) > 2:
            return token[2:]
        option = (
            tokens[index + 1]
            if token == "-o" and index + 1 < len(tokens)
            else token[2:]
            if token.startswith("-o")
            else ""
        )
        key, _, value = option.replace(" ", "=", 1).partition("=")
        if key.lower() == "proxyjump" and value:
            return value
    return None


# ---------------------------------------------------------------------------- resolution


def _resolve_entries(entries: list[_Entry], where: _Where, ssh_config: Path | None) -> list[HostSpec]:
    specs = []
    parse = host_spec_parser(ssh_config)
    for entry in entries:
        values = {"address": entry.name, **entry.values}
        if values.get("ssh_args") and not values.get("jump"):
            values["jump"] = _jump_from_ssh_args(values["ssh_args"])
        spec = _build(_Entry(entry.name, entry.line, values), where, parse)
        specs.append(replace(spec, groups=tuple(entry.groups)))
    _no_same_machine(specs, [entry.line for entry in entries], where)
    return specs


def _build(entry: _Entry, where: _Where, parse: Callable[[str], HostSpec]) -> HostSpec:
    values = entry.values
    domains = dict(values.get("domains") or {})
    if values.get("connection") == "local":
        local = local_spec(entry.name)
        return replace(local, labels=_labels(values, entry, where), profile=_text(values, "profile"), domains=domains)
    address = str(values.get("address") or entry.name)
    try:
        spec = parse(address)
        jump_text = _text(values, "jump")
        jump = parse(jump_text) if jump_text else None
    except ValueError as exc:
        message = where.at(entry.line, f"host {entry.name!r}: {exc}")
        if where.lenient:  # this host only: reported unreachable with the reason, the others swept
            return HostSpec(name=entry.name, hostname=entry.name, problem=message)
        raise InventoryError(message) from None
    if spec.is_local:
        return replace(spec, name=entry.name, domains=domains)
    user, port = _text(values, "user"), _port(values, entry, where)
    if values.get("_spec"):
        # A spec string: what it says (URL, user@, :port, ssh config) wins over `defaults:`.
        explicit_port = "://" in address or ":" in address
        user = spec.user or user
        port = spec.port if explicit_port or port is None else port
        jump = spec.jump or jump
    identity = _text(values, "identity_file")
    return replace(
        spec,
        name=entry.name,
        user=user or spec.user,
        port=port or spec.port,
        jump=jump or spec.jump,
        identity_file=Path(identity).expanduser() if identity else spec.identity_file,
        labels=_labels(values, entry, where),
        profile=_text(values, "profile") or spec.profile,
        domains=domains,
    )


def _mapping(values: dict[str, Any], key: str, where: _Where, line: int | None) -> dict[str, Any]:
    value = values.get(key) or {}
    if not isinstance(value, dict):
        name = values.get("name") or values.get("address") or "defaults"
        raise InventoryError(where.at(line, f"host {name!r}: {key} must be a mapping of name: value"))
    return value


def _text(values: dict[str, Any], key: str) -> str | None:
    value = values.get(key)
    return None if value is None or value == "" else str(value)


def _port(values: dict[str, Any], entry: _Entry, where: _Where) -> int | None:
    value = values.get("port")
    if value is None or value == "":
        return None
    text = str(value)
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise InventoryError(where.at(entry.line, f"host {entry.name!r}: port {value!r} is not 1-65535"))
    return int(text)


def _labels(values: dict[str, Any], entry: _Entry, where: _Where) -> dict[str, str]:
    labels = values.get("labels") or {}
    if not isinstance(labels, dict):
        raise InventoryError(where.at(entry.line, f"host {entry.name!r}: labels must be a mapping of name: value"))
    return {str(k): "" if v is None else str(v) for k, v in labels.items()}


def _machine(spec: HostSpec) -> tuple[Any, ...]:
    """What a connection reaches: host (case-free) and port, through which jump hosts."""
    if spec.is_local:
        return ("local",)
    return (spec.hostname.lower().rstrip("."), spec.port, _machine(spec.jump) if spec.jump else None)


def _no_same_machine(specs: list[HostSpec], lines: list[int | None], where: _Where) -> None:
    """``ssh://root@gpu-01``, ``root@gpu-01:22`` and ``gpu-01`` are one machine: swept twice, its
    evidence would be counted twice under two names, so the inventory is refused, naming both lines."""
    seen: dict[tuple[Any, ...], tuple[HostSpec, int | None]] = {}
    for spec, line in zip(specs, lines, strict=True):
        first = seen.setdefault(_machine(spec), (spec, line))
        if first[0] is not spec:
            where_first = f"line {first[1]}" if first[1] else "earlier"
            target = "this node" if spec.is_local else spec.address
            raise InventoryError(
                where.at(
                    line,
                    f"host {spec.name!r} is the same machine as {first[0].name!r} ({where_first}): "
                    f"both reach {target}; list it once",
                )
            )


def _no_duplicates(specs: list[HostSpec], lines: list[int | None], where: _Where) -> None:
    seen: dict[str, int | None] = {}
    for spec, line in zip(specs, lines, strict=False):
        if spec.name in seen:
            raise InventoryError(where.at(line, f"host {spec.name!r} listed twice (first on line {seen[spec.name]})"))
        seen[spec.name] = line


def declared_tenancies(hosts: list[HostSpec]) -> dict[str, str]:
    """Each host's ``tenancy`` label (nightowl YAML ``labels: {tenancy: vm}``, Ansible ``nightowl_labels``): the
    runbooks' ``tenancy`` parameter for a sweep, host by host (docs/reference.md#tenancy)."""
    return {host.name: host.labels["tenancy"] for host in hosts if host.labels.get("tenancy")}
