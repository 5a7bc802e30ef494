"""The alerting path of a real fleet, from Debian's packages, on loopback:

    nightowl check --textfile -> prometheus-node-exporter (textfile collector)
      -> prometheus (deploy/prometheus rules) -> prometheus-alertmanager (deploy/prometheus/alertmanager.yml)
      -> nightowl serve (the CLI, a subprocess) -> an evidence bundle on disk

The deploy files are used as shipped; only addresses, the token and the capture's host change:
Alertmanager's receivers point at 127.0.0.1, and serve's rules (deploy/prometheus/nightowl-serve.yml)
replay a recorded host named after the alert's node instead of opening ``ssh://root@node``.
Prometheus hands its first targets to the scraper about 5 s after start (a fixed throttle in its
discovery manager), so the stack starts once per session and tests only rewrite the textfile.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.fleet.daemons import LOOPBACK, Daemon, assert_loopback_only, free_port, http_get, wait_for

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "prometheus"
BINARIES = ("prometheus", "prometheus-alertmanager", "prometheus-node-exporter")
TOKEN = "nightowl-pipeline-test-token"


def nightowl_argv() -> list[str]:
    """The installed ``nightowl`` of the running interpreter's environment."""
    script = Path(sys.executable).parent / "nightowl"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from nightowl.cli.main import main; main()"]


def missing_binaries() -> list[str]:
    return [b for b in BINARIES if shutil.which(b) is None]


class PrometheusStack:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.textfiles = root / "textfile"
        self.recorded = root / "recorded"  # serve replays recorded/<node> for an alert on <node>
        self.bundles = root / "serve-bundles"
        for folder in (self.textfiles, self.recorded, self.bundles):
            folder.mkdir()
        (root / "token").write_text(TOKEN + "\n")
        self.daemons: list[Daemon] = []
        self.ports: dict[str, int] = {}

    # --- start / stop ---------------------------------------------------------------------------
    def start(self) -> PrometheusStack:
        try:
            self._start_serve()
            self._start_node_exporter()
            self._start_alertmanager()
            self._start_prometheus()
            for path in ("alertmanager", "prometheus"):
                port = self.ports[path]
                wait_for(f"{path} ready", lambda p=port: http_get(f"http://{LOOPBACK}:{p}/-/ready"), 30, self.daemons)
            assert_loopback_only(self.daemons)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for daemon in reversed(self.daemons):  # prometheus first, serve last: drain the flow
            daemon.stop()

    def _start_serve(self) -> None:
        config = self.root / "serve.yml"
        config.write_text(yaml.safe_dump(self.serve_config(), sort_keys=False))
        serve = Daemon(
            "serve", [*nightowl_argv(), "serve", "--config", str(config), "--listen", f"{LOOPBACK}:0"], self.root
        )
        self.daemons.append(serve)
        line = wait_for(
            "serve listening",
            lambda: re.search(r"listening on http://[\d.]+:(\d+)/", serve.log.read_text()),
            30,
            [serve],
        )
        self.ports["serve"] = int(line.group(1))

    def _start_node_exporter(self) -> None:
        self.ports["node_exporter"] = port = free_port()
        argv = [
            "prometheus-node-exporter",
            f"--web.listen-address={LOOPBACK}:{port}",
            "--collector.disable-defaults",
            "--collector.textfile",
            f"--collector.textfile.directory={self.textfiles}",
        ]
        self.daemons.append(Daemon("node_exporter", argv, self.root))

    def _start_alertmanager(self) -> None:
        # no gossip: it would bind 0.0.0.0:9094
        argv = ["prometheus-alertmanager", "--cluster.listen-address="]
        self._start_configured("alertmanager", argv, self.alertmanager_config(), "--storage.path")

    def _start_prometheus(self) -> None:
        self._start_configured("prometheus", ["prometheus"], self.prometheus_config(), "--storage.tsdb.path")

    def _start_configured(self, name: str, argv: list[str], config: dict[str, Any], storage_flag: str) -> None:
        """Daemon ``name`` (Prometheus' flag conventions) on a free loopback port, ``config`` as its YAML file."""
        self.ports[name] = port = free_port()
        path = self.root / f"{name}.yml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        argv = [
            *argv,
            f"--config.file={path}",
            f"{storage_flag}={self.root / f'{name}-data'}",
            f"--web.listen-address={LOOPBACK}:{port}",
            "--log.level=warn",
        ]
        self.daemons.append(Daemon(name, argv, self.root))

    # --- configs: the deploy files with test addresses ----------------------------------------
    def serve_config(self) -> dict[str, Any]:
        config = yaml.safe_load((DEPLOY / "nightowl-serve.yml").read_text())
        config.update(listen=f"{LOOPBACK}:0", out=str(self.bundles), token_file=str(self.root / "token"))
        config.pop("token_env", None)
        config.pop("known_hosts", None)
        for rule in config["rules"]:
            rule["host"] = rule["host"].replace("ssh://root@", f"replay:{self.recorded}/")
            assert rule["host"].startswith("replay:"), rule
        return config

    def alertmanager_config(self) -> dict[str, Any]:
        config = yaml.safe_load((DEPLOY / "alertmanager.yml").read_text())
        for receiver in config["receivers"]:
            for hook in receiver.get("webhook_configs", []):
                if receiver["name"] == "nightowl":
                    hook["url"] = f"http://{LOOPBACK}:{self.ports['serve']}/alertmanager"
                    hook["http_config"]["authorization"]["credentials_file"] = str(self.root / "token")
                else:  # people's receivers: nothing listens there, so nothing is delivered
                    hook["url"] = f"http://{LOOPBACK}:9/{receiver['name']}"
        return config

    def prometheus_config(self) -> dict[str, Any]:
        return {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(p) for p in sorted(DEPLOY.glob("*.rules.yml"))],
            "alerting": {
                "alertmanagers": [{"static_configs": [{"targets": [f"{LOOPBACK}:{self.ports['alertmanager']}"]}]}]
            },
            "scrape_configs": [
                {"job_name": "node", "static_configs": [{"targets": [f"{LOOPBACK}:{self.ports['node_exporter']}"]}]}
            ],
        }

    # --- what tests ask -------------------------------------------------------------------------
    def query(self, promql: str) -> list[dict[str, Any]]:
        import json
        import urllib.parse

        url = f"http://{LOOPBACK}:{self.ports['prometheus']}/api/v1/query?query={urllib.parse.quote(promql)}"
        return list(json.loads(http_get(url))["data"]["result"])

    def captures(self) -> list[dict[str, Any]]:
        from tests.fleet.daemons import json_lines

        return json_lines(self.bundles / "captures.jsonl")
