"""nightowl/bundled_templates.py: the built-in templates, one environment per setting and process."""

from __future__ import annotations

import jinja2
import pytest

from nightowl.bundled_templates import environment


def test_one_environment_a_setting_keeps_its_compiled_templates() -> None:
    html = environment(autoescape=True, trimmed=True, strict=True)
    assert environment(autoescape=True, trimmed=True, strict=True) is html
    assert html.get_template("sweep.html.j2") is html.get_template("sweep.html.j2")  # compiled once


def test_each_setting_does_what_it_says() -> None:
    source = "{% if x %}\n<{{ x }}>\n{% endif %}\n"
    assert environment(autoescape=True, trimmed=True).from_string(source).render(x="<b>") == "<&lt;b&gt;>\n"
    assert environment(autoescape=False).from_string(source).render(x="<b>") == "\n<<b>>\n\n"
    assert environment(autoescape=False).from_string("[{{ y }}]").render() == "[]"
    with pytest.raises(jinja2.UndefinedError):
        environment(autoescape=True, strict=True).from_string("[{{ y }}]").render()
