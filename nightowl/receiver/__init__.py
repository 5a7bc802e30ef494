"""The webhook receiver behind ``nightowl serve``: capture evidence the moment an alert fires.

Alertmanager and PagerDuty v3 webhooks come in over HTTP; each firing alert that a rule matches
runs that rule's runbook on the host it names, and the bundle keeps the alert in its manifest.

* ``payload``: webhook JSON -> :class:`~nightowl.receiver.payload.Alert`; PagerDuty signatures.
* ``rules``: label matchers, rules, host and parameter templates (alert -> runbook and host).
* ``credentials``: secrets from the config, a file or the environment.
* ``notify``: the verdict back to PagerDuty, a chat webhook or any JSON endpoint, on its own thread.
* ``auth``: bearer token and the browser's signed session cookie.
* ``config``: the YAML config, checked key by key at start-up.
* ``capture``: plan one alert's capture and run it into a bundle (also ``triage --alert``).
* ``queue``: the bounded queue, worker pool, de-duplication and ``captures.jsonl`` journal.
* ``http``: the HTTP server and handlers; the index page is ``templates/receiver-index.html.j2``.

Each module imports only those listed before it, so the package has no import cycle.
"""
