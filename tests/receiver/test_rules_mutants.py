"""receiver/rules.py on its own (issue 30 mutation figures): where a host template's host name lies,
what a label may render into a host or a parameter, and the names and messages of each refusal."""

from __future__ import annotations

import pytest

from nightowl.receiver.payload import Alert
from nightowl.receiver.rules import (
    HostTemplate,
    Matcher,
    Rule,
    _host_span,
    check_host_name,
    host_name,
    label_value_problem,
    render_host,
    render_params,
    split_host_template,
)

LABELS = {"alertname": "A", "h": "gpu-17", "ip": "fe80::1", "climb": "x/../y", "abs": "/etc", "url": "http://evil"}
ALERT = Alert("alertmanager", "firing", LABELS, {"note": "n"}, None, None, "f")
URL_REFUSED = "a label may not choose a URL's scheme or host (list the param in the rule's `label_urls` to allow it)"


def rule(host: str = "h", **params: object) -> Rule:
    return Rule("r", (Matcher.parse("alertname=A"),), "xid", host, params=dict(params), label_urls=("url",))


@pytest.mark.parametrize(
    ("spec", "host"),
    [
        ("replay:DIR/NAME", "NAME"),
        ("replay:a/b/NAME", "NAME"),
        ("replay:NAME", "NAME"),
        ("ssh://user@host:22?q", "host"),
        ("ssh://host/path", "host"),
        ("ssh://host#frag", "host"),
        ("ssh://host?jump=b#f", "host"),
        ("user@host:22", "host"),
        ("user@host?jump=x", "host"),
        ("host", "host"),
        ("host/x", "host/x"),  # a path is a URL's only
        ("[fe80::1]:22", "fe80::1"),
        ("ssh://root@[fe80::1]:22", "fe80::1"),
        ("host:abc", "host:abc"),
        ("a:1:2", "a:1:2"),
        ("a@b@host", "host"),
        ("gpu]17", "gpu]17"),  # a "]" without a "[" before it opens no IPv6 literal
    ],
)
def test_the_host_span_of_a_spec(spec: str, host: str) -> None:
    start, end = _host_span(spec)
    assert spec[start:end] == host


def test_split_host_template_keeps_the_literal_parts_around_the_host() -> None:
    assert split_host_template("ssh://root@{{ labels.h }}:22?jump=b") == HostTemplate(
        "ssh://root@", "{{ labels.h }}", ":22?jump=b"
    )
    assert split_host_template("{{ labels.h }}.corp") == HostTemplate("", "{{ labels.h }}.corp", "")
    assert split_host_template("root@{{ a }}-{{ b }}:2222") == HostTemplate("root@", "{{ a }}-{{ b }}", ":2222")


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{% if x %}h{% endif %}", "only {{ expressions }} are allowed, no {% %} or {# #}"),
        ("{# c #}h", "only {{ expressions }} are allowed, no {% %} or {# #}"),
        ("{{ labels.h }", "unbalanced {{ }}"),
        ("h }}", "unbalanced {{ }}"),
        ("ssh://root@h:22/{{ labels.p }}", "a label may fill only the host name, never the scheme, user, port"),
    ],
)
def test_split_host_template_refusals(template: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        split_host_template(template)
    assert str(caught.value).startswith(f"host {template!r}: {message}")


def test_check_host_name() -> None:
    assert check_host_name("gpu-17.corp") == "gpu-17.corp"
    assert check_host_name("10.0.0.1") == "10.0.0.1"
    assert check_host_name("fe80::1") == "fe80::1"
    with pytest.raises(ValueError) as caught:
        check_host_name("gpu_17")
    assert str(caught.value) == (
        "host name 'gpu_17' is not an RFC 1123 name: label 'gpu_17' "
        "(letters, digits and inner hyphens, 1-63 characters)"
    )
    with pytest.raises(ValueError, match=r"^host name 'gpu-17\.' is not an RFC 1123 name: label ''"):
        check_host_name("gpu-17.")
    with pytest.raises(ValueError, match=r"^host name '-gpu' is not an RFC 1123 name or an IP address: "):
        check_host_name("-gpu")
    with pytest.raises(ValueError) as caught:
        check_host_name("a" * 90)
    assert str(caught.value).startswith(f"host name '{'a' * 77}...' is not")
    with pytest.raises(ValueError) as caught:
        check_host_name("a" * 40 + "." + "b" * 39 + "_")
    assert str(caught.value).startswith(f"host name '{'a' * 40}.{'b' * 36}...' is not an RFC 1123 name: label 'bbb")


def test_check_host_name_shows_a_name_of_80_characters_whole() -> None:
    with pytest.raises(ValueError) as caught:
        check_host_name("a" * 40 + "." + "b" * 38 + "_")
    assert f"host name '{'a' * 40}.{'b' * 38}_' is not" in str(caught.value)


def test_render_host() -> None:
    assert render_host(rule(" ssh://root@gpu-1:22 "), ALERT) == "ssh://root@gpu-1:22"
    assert render_host(rule("ssh://root@{{ labels.h }}:22"), ALERT) == "ssh://root@gpu-17:22"
    assert render_host(rule("root@{{ labels.ip }}"), ALERT) == "root@fe80::1"
    assert render_host(rule("ssh://root@[{{ labels.ip }}]:22"), ALERT) == "ssh://root@[fe80::1]:22"
    assert render_host(rule("root@{{ 'local' }}"), ALERT) == "root@local"  # a user: not the local transport
    assert render_host(rule("{{ annotations.note }}-{{ alert.status }}"), ALERT) == "n-firing"


@pytest.mark.parametrize(
    ("host", "message"),
    [
        ("ssh://root@{{ labels.ip }}:22", "rule r: IPv6 address 'fe80::1' in a URL template without [ ] around"),
        (" {{ 'LOCAL' }}", "rule r: a label may not turn the host into 'local'"),
        ("{{ labels.climb }}", "rule r: host name 'x/../y' is not an RFC 1123 name or an IP address: "),
    ],
)
def test_render_host_refusals(host: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        render_host(rule(host), ALERT)
    assert str(caught.value).startswith(message)


def test_render_params() -> None:
    params = render_params(
        rule(n=3, f="/var/log/{{ labels.h }}.log", lit="plain", url="{{ labels.url }}", note="{{ annotations.note }}"),
        ALERT,
    )
    assert params == {"n": 3, "f": "/var/log/gpu-17.log", "lit": "plain", "url": "http://evil", "note": "n"}
    assert render_params(rule(), ALERT) == {}
    assert render_params(rule(state="{{ alert.status }}/{{ annotations.note }}"), ALERT) == {"state": "firing/n"}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("/var/log/{{ labels.climb }}", "'/var/log/x/../y': a label may not climb out of the template's directory"),
        ("{{ labels.url }}", URL_REFUSED),
        ("{{ labels.abs }}", "'/etc': a label may not name an absolute path"),
    ],
)
def test_render_params_refusals(value: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        render_params(rule(f=value), ALERT)
    assert str(caught.value).startswith(f"rule r: parameter f: {message}")


@pytest.mark.parametrize(
    ("template", "text", "allowed", "problem"),
    [
        ("https://prom:9090/api?q={{ x }}", "https://prom:9090/api?q=http://x", False, None),  # fixed origin
        ("{{ x }}", "http://x", True, None),  # listed in label_urls
        ("x{{ x }}", "xhttp:foo", False, URL_REFUSED),
        ("{{ x }}", "mailto:foo", False, URL_REFUSED),
        ("mailto:{{ x }}", "mailto:foo", False, None),  # the template chose the scheme
        ("a/{{ x }}", "a/..\\b", False, "'a/..\\\\b': a label may not climb out of the template's directory (..)"),
        ("/data/{{ x }}", "/data", False, None),
        ("/data/{{ x }}", "/data/a/b", False, None),
        ("/data/{{ x }}", "/database", False, "'/database' is outside '/data/', the template's directory"),
        ("/data/run-{{ x }}", "/data/run-1", False, None),
        ("{{ x }}", "relative/path", False, None),
        ("{{ x }}", "/abs", False, "'/abs': a label may not name an absolute path"),
        ("plain", "plain", False, None),
    ],
)
def test_label_value_problem(template: str, text: str, allowed: bool, problem: str | None) -> None:
    assert label_value_problem("k", template, text, allowed) == problem


@pytest.mark.parametrize(
    ("spec", "name"),
    [
        ("replay:/x/gpu-17", "gpu-17"),
        ("replay:gpu-17", "gpu-17"),
        ("ssh://root@GPU-17:2222", "GPU-17"),
        ("root@h:22", "h"),
        ("::bad::[", "::bad::["),
    ],
)
def test_host_name(spec: str, name: str) -> None:
    assert host_name(spec) == name


def test_matcher_parse() -> None:
    assert Matcher.parse(' a = "x" ') == Matcher("a", "=", "x")
    assert Matcher.parse("a='x'") == Matcher("a", "=", "x")
    assert Matcher.parse('a="') == Matcher("a", "=", '"')
    assert Matcher.parse('a=""') == Matcher("a", "=", "")  # quoted empty value
    assert Matcher.parse("a=\"x'") == Matcher("a", "=", "\"x'")
    assert Matcher.parse("a=~x.*") == Matcher("a", "=~", "x.*")
    assert Matcher.parse("a!~x") == Matcher("a", "!~", "x")
    with pytest.raises(ValueError) as caught:
        Matcher.parse("bad matcher")
    assert str(caught.value) == "not a label matcher: 'bad matcher' (expected name=value, !=, =~ or !~)"
    with pytest.raises(Exception, match="missing"):
        Matcher.parse("a=~(")
    with pytest.raises(Exception, match="missing"):
        Matcher.parse("a!~(")
    assert Matcher.parse("a=(") == Matcher("a", "=", "(")  # not a regex: not compiled


def test_a_rule_matches_when_every_matcher_does() -> None:
    both = Rule("r", (Matcher.parse("alertname=A"), Matcher.parse("h=gpu-17")), "xid", "h")
    assert both.matches(ALERT)
    assert not Rule("r", (Matcher.parse("alertname=A"), Matcher.parse("h=gpu-18")), "xid", "h").matches(ALERT)
    assert Rule("r", (), "xid", "h").matches(ALERT)
    assert Matcher.parse("h=gpu-17").matches(LABELS) and not Matcher.parse("h=gpu-1").matches(LABELS)
