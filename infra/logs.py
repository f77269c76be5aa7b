"""Logs: one JSON object a line, or a short line for a person at a terminal (`log_format`). Both show a
record's message and extra fields as they were passed; secrets and turn text are never passed to a logger,
so neither format has any to hide.
"""

from __future__ import annotations

import logging
import re
import sys
from typing import Any, TextIO

import orjson

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}
FORMATS = ("auto", "json", "text")
_SHORT_LEVEL = {"WARNING": "WARN", "CRITICAL": "CRIT"}
_PLAIN = re.compile(r'[^\s"=]+')


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    """What the call passed in `extra`, and the role."""
    return {k: v for k, v in record.__dict__.items() if k not in _STANDARD and not k.startswith("_")}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update(_extras(record))
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()


class TextFormatter(logging.Formatter):
    """`19:42:01 INFO  edge message key=value ...`: the local time, the level, the logger without its
    `callscreen.` prefix, the message and the extra fields; a traceback follows on its own lines. The role,
    the same on every line of a process, is left to the JSON lines."""

    def format(self, record: logging.LogRecord) -> str:
        level = _SHORT_LEVEL.get(record.levelname, record.levelname)
        name = record.name.removeprefix("callscreen.")
        parts = [self.formatTime(record, "%H:%M:%S"), f"{level:<5}", name, record.getMessage()]
        parts += [f"{key}={_text(value)}" for key, value in _extras(record).items() if key != "role"]
        line = " ".join(parts)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def _text(value: Any) -> str:
    """A value as it reads on a terminal: plain when it is one word, else quoted as in JSON."""
    shown = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
    return shown if _PLAIN.fullmatch(shown) else orjson.dumps(shown).decode()


def formatter_for(log_format: str, stream: TextIO) -> logging.Formatter:
    """The text lines on a terminal under "auto", else the format asked for."""
    if log_format not in FORMATS:
        raise ValueError(f"log_format must be one of {', '.join(FORMATS)}, not {log_format!r}")
    if log_format == "text" or (log_format == "auto" and stream.isatty()):
        return TextFormatter()
    return JsonFormatter()


def configure(level: str = "INFO", role: str = "", log_format: str = "auto") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter_for(log_format, sys.stderr))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # aiokafka logs every connection hiccup at ERROR; its own retry logic covers them.
    logging.getLogger("aiokafka").setLevel("WARNING")
    logging.getLogger("aiohttp.access").setLevel("WARNING")
    # Faust narrates every service start and stop at INFO; keep its warnings and errors.
    logging.getLogger("faust").setLevel("WARNING")
    logging.getLogger("mode").setLevel("WARNING")
    if role:
        handler.addFilter(_RoleFilter(role))


class _RoleFilter(logging.Filter):
    def __init__(self, role: str) -> None:
        super().__init__()
        self.role = role

    def filter(self, record: logging.LogRecord) -> bool:
        record.role = self.role
        return True
