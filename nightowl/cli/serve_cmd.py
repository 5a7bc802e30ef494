"""`nightowl serve`: the alert receiver. Runs until interrupted (SIGINT or SIGTERM)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import click

from nightowl.cli.common import HISTORY_OPTION, LOG_FORMAT_OPTION, config_file_option, out_option
from nightowl.cli.exit import fail


def _listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise click.BadParameter(f"{text!r}: expected HOST:PORT, e.g. 127.0.0.1:9797")
    return host or "127.0.0.1", int(port)


@click.command()
@config_file_option("YAML rules and settings (see fixtures/alerts/serve.yaml)")
@click.option("--listen", help="HOST:PORT to listen on (default: the config's, else 127.0.0.1:9797)")
@out_option("where bundles go (default: the config's `out`)")
@LOG_FORMAT_OPTION
@HISTORY_OPTION
def serve(config_path: Path, listen: str | None, out_dir: Path | None, log_format: str) -> None:
    """Receive Alertmanager and PagerDuty v3 webhooks and capture evidence at once.

    \b
    POST /alertmanager   Alertmanager webhook (Authorization: Bearer TOKEN)
    POST /pagerduty      PagerDuty v3 webhook (bearer token as a custom header,
                         and X-PagerDuty-Signature checked against the secret)
    GET  /healthz        liveness and queue depth, no token needed
    GET  /login          browser login: post the token, get a session cookie
                         (HttpOnly, SameSite=Strict, signed, expires)
    GET  /               recent captures: severity, verdict, links to drafts,
                         and "Last sweep": the newest sweep bundle in out
    GET  /captures/RUN_ID/postmortem.md|html   one capture's draft
    GET  /captures/RUN_ID/sweep.html   a sweep's or check's fleet page, as HTML
    GET  /captures/RUN_ID/[PATH]   the bundle's files, read-only
                         (pages need the bearer token or a session,
                         unless index_requires_token: false)

    Each firing alert that a rule matches runs that rule's runbook on the host it names; the
    bundle keeps the alert in its manifest. Duplicate deliveries run once; resolved alerts are
    ignored unless the rule says `on_resolved: true`; beyond `workers` running and `queue`
    waiting, alerts are recorded as not captured, with the reason (<out>/captures.jsonl).
    On SIGTERM or SIGINT running captures get 20 s to finish; queued ones stay in the
    journal and the next `serve` on the same out resumes them (docs/receiver.md).
    With `notify:` in the config, each capture's verdict (or what prevented one) and its
    draft's link are posted to a PagerDuty incident note, a chat webhook and/or a JSON
    webhook, retried with backoff on a thread of their own (docs/receiver.md).
    Log lines go to stderr, as JSON lines (level, node, runbook, verdict, ...)
    unless stderr is a terminal or --log-format text.
    """
    from nightowl.cli.common import history_path, runbook_library, stderr_logger
    from nightowl.logline import LogLine
    from nightowl.receiver.config import ConfigError, load_config
    from nightowl.receiver.http import make_server
    from nightowl.receiver.journal import JOURNAL, ReceiverBusy
    from nightowl.receiver.queue import STOP_GRACE, Receiver

    try:
        config = load_config(config_path, out_dir, runbooks=runbook_library(), history=history_path())
    except ConfigError as exc:
        fail(str(exc))
    host, port = _listen(listen or config.listen)
    log = stderr_logger(log_format, "nightowl.serve")
    receiver = Receiver(config, log=log)
    try:
        receiver.start()
    except ReceiverBusy as exc:
        fail(str(exc))
    server = make_server(receiver, host, port)

    def stop(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    log(
        f"nightowl serve: listening on http://{host}:{server.server_address[1]}/ "
        f"({config.workers} worker(s), queue {config.queue_size}); bundles in {config.out_dir}"
    )
    try:
        server.serve_forever(poll_interval=0.5)
    except KeyboardInterrupt:
        log(f"nightowl serve: stopping; running captures get {STOP_GRACE:.0f}s to finish")
    finally:
        server.server_close()
        left = receiver.stop()
    if left:
        log(
            LogLine(
                f"nightowl serve: {left} capture(s) left queued in {config.out_dir / JOURNAL}; "
                "the next `nightowl serve` on this out resumes them",
                level="warning",
            )
        )
