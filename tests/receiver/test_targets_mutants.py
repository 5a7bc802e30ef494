"""What a notify target posts, written out (nightowl/receiver/targets/): a message cut to its size limit at a
line, with the mark that says so and never half an escape; the webhook's body fields; the PagerDuty note; the
error an operator reads for a target without its URL (scripts/mutate's survivors led here)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from nightowl.receiver.notify import parse_notify, request_for
from nightowl.receiver.targets.base import fit
from tests.receiver.outcomes import outcome_of

MARK = "… (cut to fit; the whole status update is in the bundle)"
VERDICT = {"id": "gpu-fell-off-bus", "severity": "critical", "action": "reboot-node"}
LINE = "gpu-fell-off-bus (critical) -> reboot-node"


def outcome(update: str = "", **record: object) -> object:
    made = outcome_of({"alert": "XidError", "host": "gpu-17", "verdict": VERDICT, **record}, LINE)
    return replace(made, status_update_text=update)


def test_lines_that_fit_exactly_are_all_kept() -> None:
    assert fit(["aaaa", "bbbb"], 9) == "aaaa\nbbbb"
    assert fit(["aaaa", "bbbb"], 9, " ") == "aaaa bbbb"
    assert fit([], 5) == ""
    assert fit(["a" * 5], 5) == "a" * 5


def test_the_first_line_that_does_not_fit_is_cut_with_the_mark() -> None:
    assert fit(["a" * 30, "b" * 200], 120) == "a" * 30 + "\n" + "b" * (120 - 31 - len(MARK)) + MARK
    assert len(fit(["a" * 30, "b" * 200], 120)) == 120
    assert fit(["x" * 200], 100) == "x" * (100 - len(MARK)) + MARK


def test_a_cut_keeps_more_than_twenty_characters_or_none() -> None:
    """Room for 20 characters of the next line is too little to be worth a cut: the message ends before it."""
    assert fit(["a" * 30, "b" * 100], 30 + 1 + len(MARK) + 20) == "a" * 30
    assert fit(["a" * 30, "b" * 100], 30 + 1 + len(MARK) + 21) == "a" * 30 + "\n" + "b" * 21 + MARK


def test_no_room_for_the_next_line_cuts_the_last_kept_one_when_it_is_long() -> None:
    assert fit(["a" * 100, "b" * 100], 120) == "a" * (100 - len(MARK)) + MARK
    assert fit(["a" * (len(MARK) + 21), "b" * 100], len(MARK) + 40) == "a" * 21 + MARK
    assert fit(["a" * (len(MARK) + 20), "b" * 100], len(MARK) + 40) == "a" * (len(MARK) + 20)  # too short to cut


def test_a_cut_never_leaves_half_an_escape_or_trailing_blanks() -> None:
    assert fit(["x" * 25 + "&lt;tag&gt;" + "y" * 200], len(MARK) + 27) == "x" * 25 + MARK
    assert fit(["x" * 25 + "&lt;tag" + "y" * 200], len(MARK) + 30) == "x" * 25 + "&lt;t" + MARK
    assert fit(["x" * 22 + "    " + "y" * 200], len(MARK) + 25) == "x" * 22 + MARK
    assert fit(["&" + "x" * 30 + "y" * 200], len(MARK) + 25) == MARK  # a bare & with no ; after it: cut there


def test_the_webhook_posts_the_headline_the_update_and_the_record() -> None:
    [target] = parse_notify({"webhook": {"url": "https://hooks.example/n", "token": "t0k"}}, "serve.yaml").targets
    url, headers, body = request_for(target, outcome("line one\n\nline two\n"), "https://x/draft")
    assert url == "https://hooks.example/n" and headers == {"Authorization": "Bearer t0k"}
    assert body["event"] == "nightowl.capture"
    assert body["text"] == f"nightowl: XidError on gpu-17: {LINE}"
    assert body["status_update_text"] == "line one\nline two"
    assert body["note"].endswith("\n\nline one\nline two")
    assert body["draft_url"] == "https://x/draft" and body["outcome"]["line"] == LINE
    assert body["capture"]["alert"] == "XidError"
    _, headers, body = request_for(replace(target, token=None), outcome(), None)
    assert headers == {} and body["status_update_text"] is None


def test_the_webhook_note_is_cut_at_16000_characters() -> None:
    [target] = parse_notify({"webhook": {"url": "https://hooks.example/n"}}, "serve.yaml").targets
    title = f"nightowl: XidError on gpu-17: {LINE}"
    findings = len("\n".join(outcome().findings))  # type: ignore[attr-defined]
    fits = 16000 - len(title) - findings - 3  # the title, the findings, a blank line, then the update's line
    _, _, body = request_for(target, outcome("u" * fits), None)
    assert len(body["note"]) == 16000 and body["note"].endswith("u" * fits)
    _, _, body = request_for(target, outcome("u" * (fits + 1)), None)
    assert body["note"].endswith(MARK) and len(body["note"]) <= 16000


@pytest.mark.parametrize("kind", ["webhook", "chat"])
def test_a_target_without_its_url_is_refused(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NIGHTOWL_TEST_NO_SUCH_URL", raising=False)
    with pytest.raises(ValueError) as raised:
        parse_notify({kind: {"url_env": "NIGHTOWL_TEST_NO_SUCH_URL"}}, "serve.yaml")
    assert str(raised.value) == (
        f"serve.yaml: notify.{kind}: needs url, url_file or url_env (the variable is unset or empty)"
    )


def test_the_pagerduty_note_goes_on_the_labelled_incident(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NIGHTOWL_TEST_PD", "k3y")
    doc = {"token_env": "NIGHTOWL_TEST_PD", "from": "oncall@example.com", "incident_label": "pd_incident"}
    [target] = parse_notify({"pagerduty": doc}, "serve.yaml").targets
    url, headers, body = request_for(target, outcome("up", labels={"pd_incident": "P/1"}), "https://x/d")
    assert url == "https://api.pagerduty.com/incidents/P%2F1/notes"
    assert headers == {
        "Authorization": "Token token=k3y",
        "From": "oncall@example.com",
        "Accept": "application/vnd.pagerduty+json;version=2",
    }
    content = body["note"]["content"]
    assert content.startswith(f"nightowl: XidError on gpu-17: {LINE}\n")
    assert content.endswith("\n\nStatus update:\nup\nPostmortem draft: https://x/d")
    with pytest.raises(LookupError) as raised:
        request_for(target, outcome(source="alertmanager"), None)
    assert (
        str(raised.value)
        == "no PagerDuty incident: the alert came from alertmanager and carries no `pd_incident` label"
    )


def test_the_pagerduty_note_is_cut_to_4000_characters_with_the_draft_link_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NIGHTOWL_TEST_PD", "k3y")
    doc = {"token_env": "NIGHTOWL_TEST_PD", "from": "oncall@example.com"}
    [target] = parse_notify({"pagerduty": doc}, "serve.yaml").targets
    told = outcome(source="pagerduty", fingerprint="P1")
    body_chars = len(request_for(target, told, None)[2]["note"]["content"])
    tail = "\nPostmortem draft: https://x/d"
    fits = 4000 - body_chars - len("\n\nStatus update:\n") - len(tail)
    content = request_for(target, replace(told, status_update_text="u" * fits), "https://x/d")[2]["note"]["content"]
    assert len(content) == 4000 and content.endswith("u" * fits + tail)
    content = request_for(target, replace(told, status_update_text="u" * (fits + 1)), "https://x/d")[2]["note"][
        "content"
    ]
    assert content.endswith(MARK + tail) and len(content) <= 4000


def test_an_alert_with_no_source_and_no_label_is_skipped_saying_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NIGHTOWL_TEST_PD", "k3y")
    [target] = parse_notify({"pagerduty": {"token_env": "NIGHTOWL_TEST_PD", "from": "a@b"}}, "s").targets
    with pytest.raises(LookupError) as raised:
        request_for(target, outcome(), None)
    assert str(raised.value) == "no PagerDuty incident: the alert came from ? and carries no `incident_label` label"


def test_the_chat_message_blocks_and_fallback() -> None:
    [target] = parse_notify({"chat": {"url": "https://chat.example/hook"}}, "serve.yaml").targets
    url, headers, body = request_for(target, outcome("line one\nline two"), "https://x/d")
    assert (url, headers) == ("https://chat.example/hook", {})
    head = f"nightowl: XidError on gpu-17: {LINE}".replace(">", "&gt;")  # chat text is markup: escaped
    findings = list(outcome().findings)  # type: ignore[attr-defined]
    assert body["blocks"] == [
        {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join([head, *findings])}},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": "<https://x/d|postmortem draft>"}]},
        {"type": "section", "text": {"type": "mrkdwn", "text": "```\nline one\nline two\n```"}},
    ]
    assert body["text"] == " ".join([head, *findings]) + " https://x/d"
    assert [block["type"] for block in request_for(target, outcome(), None)[2]["blocks"]] == ["section"]


def test_a_chat_section_is_cut_at_3000_characters() -> None:
    [target] = parse_notify({"chat": {"url": "https://chat.example/hook"}}, "serve.yaml").targets
    fits = 3000 - 8
    shown = request_for(target, outcome("u" * fits), None)[2]["blocks"][1]["text"]["text"]
    assert shown == f"```\n{'u' * fits}\n```" and len(shown) == 3000
    shown = request_for(target, outcome("u" * (fits + 1)), None)[2]["blocks"][1]["text"]["text"]
    assert shown.endswith(MARK + "\n```") and len(shown) <= 3000
    long = outcome_of({"alert": "X" * 3000, "host": "gpu-17", "verdict": VERDICT}, LINE)
    section = request_for(target, long, None)[2]["blocks"][0]["text"]["text"]
    assert len(section) == 3000 and section.endswith(MARK)


def test_with_no_room_left_the_last_kept_line_is_cut_not_the_first() -> None:
    assert fit(["a" * 10, "b" * 100, "c" * 100], 115) == "a" * 10 + "\n" + "b" * (100 - len(MARK)) + MARK


def test_a_headline_without_a_title_or_host_says_so() -> None:
    bare = replace(outcome(), title="", host=None)  # type: ignore[type-var]
    [target] = parse_notify({"webhook": {"url": "https://hooks.example/n"}}, "serve.yaml").targets
    assert request_for(target, bare, None)[2]["text"] == f"nightowl: alert on -: {LINE}"


def test_a_url_that_is_not_http_is_refused_without_its_query() -> None:
    url = "ftp://hooks.example/" + "p" * 60 + "?token=s3cret"
    with pytest.raises(ValueError) as raised:
        parse_notify({"webhook": {"url": url}}, "serve.yaml")
    assert str(raised.value) == f"serve.yaml: notify.webhook: {url[:40]!r} is not an http(s) URL"
    assert "s3cret" not in str(raised.value)
    with pytest.raises(ValueError) as raised:
        parse_notify({"chat": {"url": "ftp://h/x?token=s3cret"}}, "serve.yaml")
    assert str(raised.value) == "serve.yaml: notify.chat: 'ftp://h/x' is not an http(s) URL"


TARGET = """
from nightowl.receiver.targets.base import Target

KIND = "{kind}"
RANK = {rank}
KEYS = frozenset({{"url"}})


def parse(doc, where):
    return Target(KIND, str(doc["url"]))


def request(target, outcome, link):
    return target.url, {{}}, {{}}
"""


def test_targets_are_posted_in_rank_order_then_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pagerduty (0), chat (1), webhook (2): a site's own target module comes where its RANK puts it."""
    import sys

    from nightowl.receiver import targets

    for kind, rank in (("aaa", 2), ("zzz", 2), ("zearly", -1)):
        (tmp_path / f"{kind}.py").write_text(TARGET.format(kind=kind, rank=rank))
        monkeypatch.delitem(sys.modules, f"nightowl.receiver.targets.{kind}", raising=False)
    monkeypatch.setattr(targets, "__path__", [*targets.__path__, str(tmp_path)])
    targets.registry.cache_clear()
    try:
        assert list(targets.registry()) == ["zearly", "pagerduty", "chat", "aaa", "webhook", "zzz"]
    finally:
        targets.registry.cache_clear()


def test_the_chat_fallback_text_is_cut_to_4000_characters_with_the_link() -> None:
    [target] = parse_notify({"chat": {"url": "https://chat.example/hook"}}, "serve.yaml").targets
    long = outcome_of({"alert": "X" * 5000, "host": "gpu-17", "verdict": VERDICT}, LINE)
    text = request_for(target, long, "https://x/d")[2]["text"]
    assert len(text) == 4000 and text.endswith(MARK + " https://x/d")
    text = request_for(target, long, None)[2]["text"]
    assert len(text) == 3999 and text.endswith(MARK)


def test_pagerduty_needs_both_a_key_and_a_sender(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NIGHTOWL_TEST_PD", "k3y")
    says = "serve.yaml: notify.pagerduty: needs a REST API key (token_file or token_env) and `from` (a user's email)"
    for doc in ({"token_env": "NIGHTOWL_TEST_PD"}, {"from": "a@b", "api_url": "https://pd.example"}):
        with pytest.raises(ValueError) as raised:
            parse_notify({"pagerduty": doc}, "serve.yaml")
        assert str(raised.value) == says


def test_pagerduty_api_url_with_a_trailing_slash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NIGHTOWL_TEST_PD", "k3y")
    doc = {"token_env": "NIGHTOWL_TEST_PD", "from": "a@b", "api_url": "https://pd.example/v2//"}
    [target] = parse_notify({"pagerduty": doc}, "serve.yaml").targets
    url = request_for(target, outcome(source="pagerduty", fingerprint="P1"), None)[0]
    assert url == "https://pd.example/v2/incidents/P1/notes"


def test_the_webhook_carries_the_finding_lines() -> None:
    [target] = parse_notify({"webhook": {"url": "https://hooks.example/n"}}, "serve.yaml").targets
    told = outcome()
    assert request_for(target, told, None)[2]["finding"] == list(told.findings)  # type: ignore[attr-defined]
    assert told.findings == ("First action: reboot-node",)  # type: ignore[attr-defined]
