"""The docs and --help point only at what a user has: the repository and public sources.

Every citation names a section of docs/ (reference.md, sources.md) or a public primary source, never a
document kept outside the repository or a path on a build machine.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import click
import pytest
import yaml

from nightowl import docgen
from nightowl.cli.exit import ExitStatus
from nightowl.cli.main import main
from nightowl.collectors import MODULES, available_kinds, get_collector
from nightowl.knowledge import actions

ROOT = Path(__file__).resolve().parent.parent
# Where a reader looks: the package, the docs, the runbooks and everything shipped beside them.
CHECKED = ("nightowl", "docs", "runbooks", "templates", "deploy", "scripts", "bench", "integrations", "README.md")
# Documents users do not have, and machine paths.
FORBIDDEN = ("CONTRACT", "../shared", "/work/", "decision-trees.md", "peers-gpu-health", "peers-runbook-engines")
# Being rewritten into data files with their public sources (issue 11 item 5); drop each entry when it lands.
PENDING: frozenset[str] = frozenset()


def tracked_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-z", "--", *CHECKED], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    return [name for name in out.split("\0") if name]


def forbidden_in(text: str) -> list[str]:
    return [word for word in FORBIDDEN if word in text]


def test_forbidden_words_are_detected() -> None:
    assert forbidden_in("see CONTRACT s4") == ["CONTRACT"]
    assert forbidden_in("(/work/shared/domain/decision-trees.md 5.4)") == ["/work/", "decision-trees.md"]
    assert forbidden_in("docs/reference.md#verdicts, docs/sources.md#xid") == []


def test_no_citation_of_a_document_users_do_not_have() -> None:
    files = tracked_files()
    assert "README.md" in files and any(f.startswith("nightowl/") for f in files)
    hits = []
    for name in files:
        if name in PENDING:
            continue
        try:
            text = (ROOT / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        for lineno, line in enumerate(text.splitlines(), 1):
            hits += [f"{name}:{lineno}: {word}" for word in forbidden_in(line)]
    assert not hits, "\n".join(hits)


ALL_HELP = [(ctx.command_path, ctx.get_help()) for ctx in docgen.walk(main)]


def test_the_walk_covers_nested_commands() -> None:
    paths = {path for path, _ in ALL_HELP}
    assert {"nightowl", "nightowl triage", "nightowl runbook validate", "nightowl bench compare"} <= paths


@pytest.mark.parametrize(("path", "text"), ALL_HELP, ids=[path for path, _ in ALL_HELP])
def test_help_cites_no_document_users_do_not_have(path: str, text: str) -> None:
    assert not forbidden_in(text), f"{path} --help: {forbidden_in(text)}"


# --- docs/reference.md: generated parts up to date, hand-written parts complete ----------------------

REFERENCE = ROOT / "docs" / "reference.md"
DOC = REFERENCE.read_text(encoding="utf-8")


def section(title: str, text: str = DOC) -> str:
    """The text under a ``## title`` heading, up to the next heading of the same level."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match, f"no section {title!r}"
    return match.group(1)


def command_sections() -> dict[str, str]:
    """Command path -> its generated section (heading to the next command heading)."""
    parts = re.split(r"^#{3,4} `(nightowl[^`]*)`\n", section("Commands"), flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_generated_sections_are_up_to_date() -> None:
    rendered = docgen.sections()
    for path in docgen.FILES:
        text = path.read_text()
        assert docgen.render_file(text, rendered) == text, f"{path.name}: run python -m nightowl.docgen"


def test_regenerate_replaces_a_stale_block_and_refuses_an_unknown_one() -> None:
    stale = "a\n<!-- BEGIN GENERATED: kinds -->\nold\n<!-- END GENERATED -->\nb\n"
    fresh = docgen.regenerate(stale, {"kinds": "new"})
    assert "new" in fresh and "old" not in fresh and fresh.startswith("a\n") and fresh.endswith("b\n")
    with pytest.raises(KeyError):
        docgen.regenerate(stale.replace("kinds", "facts"), {"kinds": "new"})


@pytest.mark.parametrize("ctx", list(docgen.walk(main)), ids=lambda ctx: ctx.command_path)
def test_every_command_has_help_and_every_option_is_documented(ctx) -> None:
    assert (ctx.command.help or "").strip(), f"{ctx.command_path} has no help text"
    documented = command_sections()
    assert ctx.command_path in documented, f"{ctx.command_path} missing from docs/reference.md"
    body = documented[ctx.command_path]
    for param in ctx.command.get_params(ctx):
        for name in getattr(param, "opts", ()):
            if name.startswith("-") and name not in ("--help", "-h"):
                assert f"`{name}`" in body, f"{ctx.command_path} {name} missing from docs/reference.md"


def test_every_kind_is_documented() -> None:
    kinds = section("Kinds")
    missing = [kind for kind in MODULES if f"| `{kind}` |" not in kinds]
    assert not missing, missing


def test_every_exit_status_is_documented() -> None:
    table = section("Exit status")
    missing = [status for status in ExitStatus if not re.search(rf"^\| {int(status)} \|", table, re.M)]
    assert not missing, missing


def runbook_actions() -> set[str]:
    actions = set()
    for path in sorted((ROOT / "runbooks").glob("*.yaml")):
        for node in yaml.safe_load(path.read_text())["nodes"].values():
            if "verdict" in node:
                actions.add(node["verdict"]["action"])
    return actions


def test_every_verdict_action_is_documented() -> None:
    table = section("Verdicts")
    used = runbook_actions()
    assert used and used <= set(actions.names())
    missing = [action for action in actions.names() if not re.search(rf"^\| `{action}` \|", table, re.M)]
    assert not missing, missing


def test_the_runbook_example_is_a_valid_runbook(tmp_path: Path) -> None:
    from nightowl.engine.validate import load_runbook

    example = re.search(r"```yaml\n(.*?)```", section("Runbook syntax"), re.S)
    assert example
    path = tmp_path / "example.yaml"
    path.write_text(example.group(1))
    loaded = load_runbook(path, known_collectors=available_kinds())
    assert loaded.id == "gpu-basic"


def anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#+ (.+)$", path.read_text(encoding="utf-8"), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_citations_of_docs_point_at_existing_sections() -> None:
    targets = {name: anchors(ROOT / "docs" / name) for name in ("reference.md", "sources.md")}
    cited = re.compile(r"docs/(reference|sources)\.md#([\w-]+)")
    broken = []
    for name in tracked_files():
        try:
            text = (ROOT / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        broken += [
            f"{name}: {m.group(0)}" for m in cited.finditer(text) if m.group(2) not in targets[m.group(1) + ".md"]
        ]
    assert not broken, "\n".join(broken)


def test_declared_facts_render_as_a_table() -> None:
    collector = SimpleNamespace(facts_declared=[("gpu_count", int, "GPUs nvidia-smi lists")])
    assert docgen.declared_facts(collector) == [("gpu_count", "int", "GPUs nvidia-smi lists")]
    mapping = SimpleNamespace(produces={"events": {"type": "list", "meaning": "kernel events"}})
    assert docgen.declared_facts(mapping) == [("events", "list", "kernel events")]
    rows = docgen.declared_facts(get_collector("nvidia-smi"))
    assert ("driver_version", "str | None", "driver version") in rows
    facts = DOC[DOC.index("#### `nvidia-smi` facts") :]
    assert all(f"`{name}`" in facts for name, _, _ in rows)


def test_the_exit_status_section_is_generated_from_the_enum() -> None:
    """docs/reference.md#exit-status comes from nightowl/cli/exit.py: every status, and --help names each."""
    from nightowl.cli.exit import EXIT_HELP, MEANINGS, ExitStatus
    from nightowl.docgen import REFERENCE, render_exit_status

    assert set(MEANINGS) == set(ExitStatus)
    rendered = render_exit_status()
    text = REFERENCE.read_text()
    assert "<!-- BEGIN GENERATED: exit-status -->\n\n" + rendered.strip() in text
    for status in ExitStatus:
        assert f"| {int(status)} | " in rendered
        assert f"\n  {int(status)} " in EXIT_HELP
    assert "reserved" not in text.split("## Exit status")[1].split("## Kinds")[0]


# --- the generated docs do not depend on the installed click; the README's layout is complete ----------------


def _usage_line(group: click.Group) -> str:
    root = click.Group("nightowl")
    root.add_command(group)
    text = docgen.render_commands(root)
    return next(line for line in text.splitlines() if line.startswith(f"nightowl {group.name} "))


def test_a_group_usage_reads_the_same_under_old_and_new_click() -> None:
    """click before 8.4 writes a group that runs without a subcommand as ``COMMAND [ARGS]...``, 8.4 on as
    ``[COMMAND] [ARGS]...``: the docs show the latter under either (old click's metavar set by hand here)."""
    optional = click.Group("history", invoke_without_command=True)
    optional.subcommand_metavar = "COMMAND [ARGS]..."  # what click 8.1-8.3 sets for it
    assert _usage_line(optional) == "nightowl history [OPTIONS] [COMMAND] [ARGS]..."
    optional.subcommand_metavar = "[COMMAND] [ARGS]..."  # click 8.4 on
    assert _usage_line(optional) == "nightowl history [OPTIONS] [COMMAND] [ARGS]..."
    required = click.Group("runbook")
    assert _usage_line(required) == "nightowl runbook [OPTIONS] COMMAND [ARGS]..."


def layout_misses(package: Path, readme: str) -> list[str]:
    """Top-level modules and packages of ``package`` that the README's ``## Layout`` section does not name
    (as ``nightowl/<name>.py`` or ``nightowl/<name>/``)."""
    layout = section("Layout", readme)
    names = [f"{package.name}/{p.name}" for p in package.glob("*.py") if p.name != "__init__.py"]
    names += [f"{package.name}/{p.name}/" for p in package.iterdir() if (p / "__init__.py").is_file()]
    return sorted(name for name in names if f"`{name}`" not in layout)


def test_the_readme_layout_names_every_top_level_module() -> None:
    missing = layout_misses(ROOT / "nightowl", (ROOT / "README.md").read_text(encoding="utf-8"))
    assert not missing, f"README.md ## Layout does not name: {', '.join(missing)}"


def test_a_module_missing_from_the_layout_is_found(tmp_path: Path) -> None:
    package = tmp_path / "nightowl"
    (package / "engine").mkdir(parents=True)
    for name in ("__init__.py", "engine/__init__.py", "paths.py", "ages.py"):
        (package / name).write_text("")
    (package / "data").mkdir()  # not a package: not listed
    readme = "## Layout\n\n- `nightowl/engine/`: runs.\n- `nightowl/paths.py`: where.\n\n## Next\n`nightowl/ages.py`\n"
    assert layout_misses(package, readme) == ["nightowl/ages.py"]
