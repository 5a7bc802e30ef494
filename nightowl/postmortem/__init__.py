"""The postmortem draft of a bundle: what happened, when, why nightowl thinks so, and the proof.

Everything is read from the bundle alone (manifest, trace, verdicts, runbook, raw outputs), so a
draft can be rendered again anywhere, later, from a copied bundle. The shape follows the Google
SRE postmortem (summary, impact, detection, timeline, root causes, actions), with two rules:
every claim cites a file of the bundle with its sha256 from the manifest, and a root cause is
only ever a *candidate* that a runbook verdict reached from cited evidence.
"""

from nightowl.postmortem.context import bundle_context
from nightowl.postmortem.render import render_bundle

__all__ = ["bundle_context", "render_bundle"]
