"""The pure parts of `pressroom.client` and `pressroom.cli`: where the gateway and key
come from, the progress line, `--option` parsing, Server-Sent Events, paging, the error
mapping, exit statuses and webhook signatures (against the notifier's own signer)."""

from __future__ import annotations

import doctest
import io
import json

import httpx
import pytest

from pressroom import cli, progress
from pressroom.client import calls, errors, target, webhooks
from pressroom.client.models import Batch, Job
from services.core.secrets import signing


def test_flags_beat_the_environment_which_beats_the_make_up_folder(tmp_path):
    (tmp_path / "api-key").write_text("prk_from_file\n")
    folder = {"PRESSROOM_DATA_DIR": str(tmp_path), "PRESSROOM_PORT": "9999"}
    env = {**folder, "PRESSROOM_URL": "http://env:1/", "PRESSROOM_API_KEY": "prk_env"}

    flagged = target.resolve("http://flag:2", "prk_flag", env)
    assert (flagged.url, flagged.key) == ("http://flag:2", "prk_flag")
    from_env = target.resolve(None, None, env)
    assert (from_env.url, from_env.key, from_env.key_source) == (
        "http://env:1",
        "prk_env",
        "PRESSROOM_API_KEY",
    )
    found = target.resolve(None, None, folder)
    assert (found.url, found.key) == ("http://127.0.0.1:9999", "prk_from_file")
    assert found.key_source == str(tmp_path / "api-key")
    mixed = target.resolve("http://flag:2", None, folder)  # each resolved on its own
    assert (mixed.url, mixed.key) == ("http://flag:2", "prk_from_file")


def test_no_key_anywhere_is_none_and_says_where_it_looked(tmp_path):
    found = target.resolve("http://x", None, {"PRESSROOM_DATA_DIR": str(tmp_path)})
    assert found.key is None and str(tmp_path / "api-key") in found.key_source
    with pytest.raises(errors.ConfigurationError):
        target.resolve(None, None, {"PRESSROOM_PORT": "port"})


def batch(**fields) -> Batch:
    return Batch(**{"id": "b1", "status": "running", "total": 50, **fields})


def test_the_progress_line_shows_bar_counts_rate_and_eta():
    line = progress.line(batch(done=20, failed=5, progress=0.5, rate=2.5), width=10)
    assert line == "[#####-----]  20/50 done, 5 failed  2.5/s  ETA 0:10"
    assert progress.line(batch(status="paused", done=1, progress=0.02), width=4) == (
        "[----]  1/50 done  paused"
    )
    assert progress.line(batch(status="done", done=50, progress=1.0, rate=3.0), width=2) == (
        "[##]  50/50 done  3.0/s  done"
    )
    assert [progress.duration(s) for s in (7, 750, 7500)] == ["0:07", "12:30", "2:05:00"]


def test_progress_redraws_on_a_terminal_and_prints_changes_only_elsewhere():
    plain = io.StringIO()
    shown = progress.Progress(plain, live=False)
    for done in (1, 1, 2):
        shown.show(batch(done=done))
    assert plain.getvalue().count("\n") == 2 and "\r" not in plain.getvalue()

    terminal = io.StringIO()
    live = progress.Progress(terminal, live=True)
    live.show(batch(done=1))
    live.end()
    assert terminal.getvalue().startswith("\r[") and terminal.getvalue().endswith("\n")


def test_options_nest_on_dots_and_read_json_values():
    pairs = [cli.option(raw) for raw in ("format=A4", "landscape=true", "margin.top=1cm",
                                         "margin.bottom=2", "scale=0.5")]  # fmt: skip
    assert cli.options_of(pairs) == {
        "format": "A4", "landscape": True, "margin": {"top": "1cm", "bottom": 2}, "scale": 0.5
    }  # fmt: skip
    assert cli.options_of(None) is None
    with pytest.raises(Exception, match="key=value"):
        cli.option("landscape")


def test_server_sent_events_parse_ids_names_data_and_skip_comments():
    parser = calls.SseParser()
    lines = [": keep-alive", "", "id: 7", "event: done", 'data: {"status":', 'data: "done"}', ""]
    messages = [m for m in map(parser.feed, lines) if m is not None]
    assert [(m.id, m.event) for m in messages] == [("7", "done")]
    assert json.loads(messages[0].data.replace("\n", "")) == {"status": "done"}
    assert parser.last_id == "7" and calls.job_status_of(messages[0]) == "done"


def test_a_cursor_pages_until_the_last_page_or_the_limit():
    cursor = calls.Cursor(limit=5, largest=3)
    first = calls.Page([1, 2, 3], next_offset=3)
    assert cursor.size() == 3 and cursor.take(first) == [1, 2, 3]
    assert (cursor.size(), cursor.offset) == (2, 3)
    assert cursor.take(calls.Page([4, 5], next_offset=5)) == [4, 5] and cursor.size() == 0
    every = calls.Cursor(limit=None, largest=3)
    every.take(calls.Page([1], next_offset=None))
    assert every.size() == 0


def test_error_answers_map_to_one_class_per_family():
    def raised(status, body, headers=None):
        return errors.from_answer(status, json.dumps(body).encode(), headers or {})

    invalid = raised(400, {"error": {"type": "validation", "message": "bad", "field": "data"}})
    assert isinstance(invalid, errors.Invalid) and (invalid.field, invalid.status) == ("data", 400)
    limited = raised(
        429, {"error": {"type": "rate_limited", "message": "slow"}}, {"Retry-After": "3"}
    )
    assert isinstance(limited, errors.RateLimited) and limited.retry_after == 3
    assert isinstance(raised(422, {"error": {"type": "idempotency_conflict"}}), errors.Conflict)
    proxy = errors.from_answer(502, b"<html>bad gateway</html>", {})
    assert isinstance(proxy, errors.Unavailable) and proxy.type == "http"


def test_exit_statuses_follow_the_error_family():
    assert cli.exit_status(errors.NotFound("x", status=404)) == cli.API_ERROR
    assert cli.exit_status(errors.Unavailable("x", status=503)) == cli.UNAVAILABLE
    assert cli.exit_status(errors.WaitTimeout("x")) == cli.UNAVAILABLE
    assert cli.exit_status(errors.ConfigurationError("x")) == cli.USAGE


def test_a_job_without_a_file_cannot_be_downloaded():
    with pytest.raises(errors.Conflict, match="running"):
        calls.download_url(Job(id="j", status="running"))
    assert calls.download_url(Job(id="j", status="done", url="http://f")) == "http://f"


def test_verify_webhook_agrees_with_the_notifiers_signer():
    secret, other = signing.new_secret(), signing.new_secret()
    body = b'{"type":"job.done"}'
    headers = signing.headers(signing.parse_secrets(f"{other} {secret}"), "msg_1", 1000, body)
    assert webhooks.verify_webhook(body, headers, secret, now=1000)
    assert webhooks.verify_webhook(
        body, {k.upper(): v for k, v in headers.items()}, secret, now=1000
    )
    assert not webhooks.verify_webhook(body + b" ", headers, secret, now=1000)
    assert not webhooks.verify_webhook(body, headers, signing.new_secret(), now=1000)
    assert not webhooks.verify_webhook(body, {**headers, "webhook-timestamp": "x"}, secret)


def test_the_webhook_docstring_examples_run():
    assert doctest.testmod(webhooks).failed == 0


def test_a_stream_route_missing_or_full_means_poll_and_an_unknown_id_is_raised():
    def answer(status: int, kind: str) -> httpx.Response:
        body = {"error": {"type": kind, "message": "m"}}
        return httpx.Response(status, json=body)

    assert calls.stream_verdict(answer(404, "http")) == calls.ABSENT  # an older gateway
    assert calls.stream_verdict(answer(429, "too_many_streams")) == calls.BUSY
    assert calls.stream_verdict(httpx.Response(200)) == calls.OPEN
    with pytest.raises(errors.NotFound):
        calls.stream_verdict(answer(404, "not_found"))


def test_retry_wait_sends_again_only_what_is_refused_for_now_and_safe_to_repeat():
    get, cancel = calls.get_job("j"), calls.cancel("j")
    post = calls.submit(calls.Source(html="<p>x</p>"), None, None, None, None)
    keyed = calls.submit(calls.Source(html="<p>x</p>"), None, None, None, "k1")
    limited = errors.RateLimited("slow", retry_after=3, status=429)
    away = errors.Unavailable("nats", status=503)
    full = errors.Unavailable("log full", retry_after=30, status=503)
    assert calls.retry_wait(post, limited, 0, 2) == 3  # refused before anything was done
    assert calls.retry_wait(post, limited, 2, 2) is None  # retries used up
    assert calls.retry_wait(get, errors.RateLimited("quota", status=429), 0, 2) is None
    assert calls.retry_wait(get, errors.RateLimited("q", retry_after=3600), 0, 2) is None
    assert calls.retry_wait(post, away, 0, 2) is None  # might have been stored
    assert calls.retry_wait(keyed, full, 0, 2) == 30
    for call in (get, cancel, keyed):
        first, third = calls.retry_wait(call, away, 0, 5), calls.retry_wait(call, away, 2, 5)
        assert first is not None and 0.25 <= first <= 0.5
        assert third is not None and 1.0 <= third <= 2.0
    assert calls.retry_wait(get, errors.WaitTimeout("late"), 0, 2) is None
    assert calls.retry_wait(get, errors.Invalid("bad", status=400), 0, 2) is None
    assert calls.retry_wait(get, errors.NotFound("gone", status=404), 0, 2) is None


def test_render_names_its_file_after_the_source_with_the_outputs_extension(tmp_path):
    (tmp_path / "notes.md").write_text("# Notes")
    (tmp_path / "wrap.html.j2").write_text("{{ content }}")
    job = Job(id="j1", status="done")

    def parsed(*argv: str):
        return cli.build_parser().parse_args(["render", *argv])

    md = str(tmp_path / "notes.md")
    assert cli.output_path(parsed("--markdown", md), job) == "notes.pdf"
    for output, name in (("jpeg", "notes.jpg"), ("webp", "notes.webp"), ("png", "notes.png")):
        assert (
            cli.output_path(parsed("--markdown", md, "--option", f"output={output}"), job) == name
        )
    assert cli.output_path(parsed("--template-id", "a" * 32), job) == "j1.pdf"
    body = cli.render_source(parsed("--markdown", md, str(tmp_path / "wrap.html.j2")))
    assert body == {"markdown": "# Notes", "template": "{{ content }}"}
    for argv, words in (
        (("--stylesheet", md, "--html", md), "--stylesheet styles --markdown"),
        (("--markdown", md, "--html", md), "--html or a URL cannot go with it"),
        (("--markdown", md, "https://example.com"), "--html or a URL cannot go with it"),
        (("--markdown", md, md, "--template-id", "a" * 32), "not both"),
    ):
        with pytest.raises(cli.UsageError, match=words):
            cli.render_source(parsed(*argv))
