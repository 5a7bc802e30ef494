"""`nightowl postmortem`: the draft of a bundle, or a check that the bundle is unchanged."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from nightowl.cli.common import format_option
from nightowl.cli.exit import ExitStatus, fail


@click.command()
@click.argument("bundle", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="write here, not stdout")
@click.option(
    "--template",
    metavar="NAME|PATH",
    help="a template name (looked up in $NIGHTOWL_TEMPLATES, ~/.config/nightowl/templates, then the "
    "built-in templates/) or a path to a Jinja2 file",
)
@format_option(
    "md", "html", help="md: Markdown with a Mermaid graph; html: one self-contained page, graph drawn as SVG"
)
@click.option(
    "--verify",
    is_flag=True,
    help="re-hash the bundle against its manifest and check every line citation of the stored draft "
    "(file hash and line range); exit 1 on any problem",
)
@click.option(
    "--redact",
    is_flag=True,
    help="replace host names, IP addresses, serial numbers and GPU UUIDs by consistent placeholders",
)
def postmortem(bundle: Path, output: Path | None, template: str | None, fmt: str, verify: bool, redact: bool) -> None:
    """Render the postmortem draft of BUNDLE (summary, impact, detection, timeline, decision path,
    root-cause candidates, actions, evidence with sha256, open questions).

    Sections follow the Google SRE postmortem template (https://sre.google/sre-book/example-postmortem/).
    Every claim cites the lines it rests on as [E# file:Lstart-Lend], E# naming the file and its sha256;
    causes and actions are candidates for a person to confirm. With --verify, prints every file
    changed, missing or not in the manifest, every citation whose file or lines no longer match, and every
    link of an incremental read's carried.json chain that does not hold (docs/reference.md#incremental-reads).
    """
    if verify:
        from nightowl.engine.bundle_verify import verify_bundle
        from nightowl.postmortem.carried_chain import verify_carried
        from nightowl.postmortem.verify import verify_citations

        problems = verify_bundle(bundle)
        checked, cite_problems = verify_citations(bundle)
        chain_problems, chain_notes = verify_carried(bundle)  # incremental reads: the carried.json chain
        problems += cite_problems + chain_problems
        for problem in problems + chain_notes:
            click.echo(problem)
        click.echo(
            f"bundle verified: every file matches its manifest hash; {checked} line citation(s) of the draft hold"
            if not problems
            else f"{len(problems)} problem(s)"
        )
        sys.exit(int(ExitStatus.ACTION_NEEDED if problems else ExitStatus.OK))
    from jinja2 import TemplateError

    from nightowl.postmortem import render_bundle

    try:
        text = render_bundle(bundle, template, fmt=fmt, redact=redact)
    except TemplateError as exc:
        fail(f"template {template or 'postmortem.' + fmt + '.j2'}: {exc}")
    if output:
        output.write_text(text)
        click.echo(f"wrote {output}")
    else:
        click.echo(text, nl=False)
