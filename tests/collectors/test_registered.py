"""Each domain's facts.yaml (nightowl/collectors/<domain>/facts.yaml) declares its kinds: facts, description,
timeout. ``base.registered`` reads them once; a malformed entry is an error naming the file and the kind."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from nightowl.collectors import MODULES, base, get_collector

COLLECTORS = Path(base.__file__).resolve().parent


def _declared_kinds() -> dict[str, Path]:
    kinds: dict[str, Path] = {}
    for file in sorted(COLLECTORS.glob(f"*/{base.FACTS_FILE}")):
        for kind in yaml.safe_load(file.read_text(encoding="utf-8")) or {}:
            kinds[kind] = file
    return kinds


def test_every_registered_kind_has_one_entry_and_every_entry_a_kind() -> None:
    declared = _declared_kinds()
    assert sorted(declared) == sorted(MODULES)
    for kind, file in declared.items():
        # the entry sits in the domain folder of the module that registers the kind
        module = MODULES[kind].partition(":")[0].split(".")
        assert module[:2] == ["nightowl", "collectors"] and module[2] == file.parent.name, kind


@pytest.mark.parametrize("kind", sorted(MODULES))
def test_a_collector_carries_what_its_entry_declares(kind: str) -> None:
    collector = get_collector(kind)
    entry = yaml.safe_load(_declared_kinds()[kind].read_text(encoding="utf-8"))[kind]
    assert collector.kind == kind
    assert collector.description == entry["description"]
    if "timeout" in entry:
        assert collector.timeout == float(entry["timeout"])
    names = [fact.name for fact in collector.produces]
    assert names[: len(base.COMMON_FACTS)] == [fact.name for fact in base.COMMON_FACTS]
    assert set(entry.get("facts") or {}) <= set(names)
    if "includes" in entry:
        included = [fact.name for fact in get_collector(entry["includes"]).produces]
        assert names[: len(included)] == included


def _registered_from(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, kind: str = "demo-kind") -> dict:
    domain = tmp_path / "gpu"
    domain.mkdir(exist_ok=True)
    (domain / base.FACTS_FILE).write_text(text, encoding="utf-8")
    monkeypatch.setattr(base, "__file__", str(tmp_path / "base.py"))
    base._entries.cache_clear()
    base._registered.cache_clear()
    try:
        return base.registered(kind)
    finally:
        monkeypatch.undo()
        base._entries.cache_clear()
        base._registered.cache_clear()


def test_an_entry_gives_the_keyword_arguments_of_a_collector(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (
        "base-kind:\n  facts:\n    a: [int, first]\n"
        "demo-kind:\n  description: reads x\n  timeout: 7\n  includes: base-kind\n"
        "  facts:\n    b: [str | None, second, optional]\n"
    )
    fields = _registered_from(tmp_path, monkeypatch, text)
    assert fields["kind"] == "demo-kind" and fields["description"] == "reads x"
    assert fields["timeout"] == 7.0 and isinstance(fields["timeout"], float)
    produces = fields["produces"][len(base.COMMON_FACTS) :]
    assert produces == (base.Fact("a", "int", "first"), base.Fact("b", "str | None", "second", optional=True))
    collector = base.Collector(**fields, commands=(("true",),), parse=str)
    assert collector.produces == fields["produces"] and collector.timeout == 7.0


def test_an_entry_without_timeout_or_description_keeps_the_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fields = _registered_from(tmp_path, monkeypatch, "demo-kind:\n  facts:\n    a: [int, first]\n")
    assert set(fields) == {"kind", "produces"}
    assert base.Collector(**fields, commands=(), parse=str).timeout == 15.0


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("demo-kind:\n  facts:\n    a: [int]\n", r"demo-kind.facts.a: expected \[type, meaning\]"),
        ("demo-kind:\n  facts:\n    a: [int, m, rare]\n", "the third item can only be 'optional'"),
        ("demo-kind:\n  facts:\n    kind: [str, again]\n", "facts declared twice: kind"),
        ("demo-kind:\n  timout: 3\n", "unknown key.*timout"),
        ("demo-kind: [a, b]\n", "expected a mapping"),
        ("other-kind:\n  facts: {}\n", "declares kind 'demo-kind'"),
        ("demo-kind:\n  includes: nowhere\n", "declares kind 'nowhere'"),
        ("demo-kind:\n  includes: other\nother:\n  includes: demo-kind\n", "includes itself"),
        ("demo-kind: {facts: [\n", "facts.yaml: while parsing"),
    ],
)
def test_a_malformed_entry_is_an_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, error: str
) -> None:
    with pytest.raises(base.RegistrationError, match=error) as raised:
        _registered_from(tmp_path, monkeypatch, text)
    if "nowhere" not in text and "other-kind" not in text:
        assert "facts.yaml" in str(raised.value)


def test_a_kind_declared_in_two_domains_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "host").mkdir()
    (tmp_path / "host" / base.FACTS_FILE).write_text("demo-kind:\n  facts: {}\n", encoding="utf-8")
    with pytest.raises(base.RegistrationError, match="also declared in"):
        _registered_from(tmp_path, monkeypatch, "demo-kind:\n  facts: {}\n")
