"""The built-in templates (``templates/``) as a jinja2 environment, one per setting and process.

A repeating sweep writes a status update and a sweep page every round; an environment keeps its compiled
templates, so each is compiled once a process. The receiver's pages and the postmortem's drafts keep their
own (their filters, and a user's template folders). jinja2 is imported on first use: `nightowl --help` stays
fast.
"""

from __future__ import annotations

import functools
from typing import Any

from nightowl.paths import data_dir


@functools.cache
def environment(autoescape: bool, trimmed: bool = False, strict: bool = False) -> Any:
    """``autoescape``: HTML (every value escaped) or plain text; ``trimmed``: a block tag's line leaves no
    blank line; ``strict``: an undefined name is an error, not an empty string."""
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(data_dir("templates"))),
        autoescape=autoescape,
        trim_blocks=trimmed,
        lstrip_blocks=trimmed,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined if strict else jinja2.Undefined,
    )
