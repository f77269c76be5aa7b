"""Log lines: short text at a terminal, JSON elsewhere or when asked for (infra.logs)."""

from __future__ import annotations

import io
import logging
import sys
import time

import orjson
import pytest

from callscreen.cli import main
from infra.logs import JsonFormatter, TextFormatter, formatter_for

# 2026-11-29 19:42:01.250 in local time, whatever the machine's zone.
AT = time.mktime((2026, 11, 29, 19, 42, 1, 0, 0, -1)) + 0.25


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def record(level: int, name: str, message: str, **extra: object) -> logging.LogRecord:
    made = logging.LogRecord(name, level, __file__, 1, message, None, None)
    made.created, made.msecs = AT, 250.0
    made.__dict__.update(extra)
    return made


@pytest.mark.parametrize(
    ("log_format", "stream", "kind"),
    [
        ("auto", Terminal(), TextFormatter),
        ("auto", io.StringIO(), JsonFormatter),
        ("text", io.StringIO(), TextFormatter),
        ("json", Terminal(), JsonFormatter),
    ],
)
def test_text_on_a_terminal_json_elsewhere_or_as_asked(log_format: str, stream: io.StringIO, kind: type) -> None:
    assert type(formatter_for(log_format, stream)) is kind


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="log_format must be one of auto, json, text, not 'yaml'"):
        formatter_for("yaml", io.StringIO())


def test_the_command_refuses_an_unknown_format_as_json(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CALLSCREEN_LOG_FORMAT", "yaml")
    assert main(["plan", "set", "--account", "acct_x", "--plan", "watch"]) == 2
    refused = {"error": "invalid_setting", "detail": "log_format must be one of auto, json, text, not 'yaml'"}
    assert orjson.loads(capsys.readouterr().err) == refused


def test_a_text_line_is_short_and_keeps_the_fields() -> None:
    line = TextFormatter().format(
        record(logging.WARNING, "callscreen.run", "child exited; restarting it", child="worker", index=0, role="all")
    )
    assert line == "19:42:01 WARN  run child exited; restarting it child=worker index=0"
    line = TextFormatter().format(
        record(logging.INFO, "callscreen.alerting", "delivery", error="tls handshake", status=None, ms=12.5)
    )
    assert line == '19:42:01 INFO  alerting delivery error="tls handshake" status=null ms=12.5'


def test_both_formats_show_the_same_fields() -> None:
    passed = {"request_id": "r1", "method": "POST", "route": "/v1/events/{token}", "status": 200, "ms": 1.5}
    entry = orjson.loads(JsonFormatter().format(record(logging.DEBUG, "callscreen.edge", "request", **passed)))
    assert entry["level"] == "debug" and entry["logger"] == "callscreen.edge" and entry["msg"] == "request"
    assert {k: entry[k] for k in passed} == passed
    line = TextFormatter().format(record(logging.DEBUG, "callscreen.edge", "request", **passed))
    assert line == "19:42:01 DEBUG edge request request_id=r1 method=POST route=/v1/events/{token} status=200 ms=1.5"


def test_a_traceback_follows_the_text_line() -> None:
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        failed = record(logging.ERROR, "callscreen.edge", "unhandled error", request_id="r2")
        failed.exc_info = sys.exc_info()
    first, *rest = TextFormatter().format(failed).splitlines()
    assert first == "19:42:01 ERROR edge unhandled error request_id=r2"
    assert rest[0] == "Traceback (most recent call last):" and rest[-1] == "RuntimeError: boom"
