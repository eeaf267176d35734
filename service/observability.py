"""Request ids and structured logs.

The id of the request being served lives in a context variable: every log line written while
serving it carries it, and so does every call to Solr and the LLM (`X-Request-Id` header), so
one answer can be followed across the three services' logs. With tracing on (service.tracing)
the request id is the trace's id, and each call carries its span's `traceparent` too.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from contextvars import ContextVar
from typing import TextIO

from service import tracing

request_id_var: ContextVar[str] = ContextVar("request_id", default="-")

REQUEST_ID_HEADER = "X-Request-Id"

_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def printable(text: str) -> str:
    """`text` with control characters and line separators written as escapes (`\\x0a`), so
    text a client chose (a path, a query quoted in a reason) cannot forge a log line."""
    return _UNPRINTABLE.sub(lambda match: f"\\x{ord(match.group()):02x}", text)


class TextFormatter(logging.Formatter):
    """The plain format, one line per message: its control characters are escaped (a
    traceback, added after the message, keeps its lines)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = printable(record.message)
        return super().formatMessage(record)


def request_headers() -> dict[str, str]:
    """Headers that carry the current request id upstream (none outside a request), and the
    current span's W3C `traceparent` when tracing is on (service.tracing)."""
    request_id = request_id_var.get()
    headers = {REQUEST_ID_HEADER: request_id} if request_id != "-" else {}
    if tracing.enabled():
        tracing.inject(headers)
    return headers


class RequestIdFilter(logging.Filter):
    """Gives every log record the id of the request being served."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):  # an `extra` may name it already
            record.request_id = request_id_var.get()
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message, request_id, and any `extra`."""

    _STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "request_id"}

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", "-"),
        }
        entry.update({k: v for k, v in vars(record).items() if k not in self._STANDARD})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to the process's stderr as it is when a record is written, not as it was when
    logging was set up (as Python's own last-resort handler does): a stream put in its place
    for a while and closed since (a test's captured output) is never written to."""

    def __init__(self) -> None:
        logging.Handler.__init__(self)

    @property  # type: ignore[override]
    def stream(self) -> TextIO:
        return sys.stderr


def configure_logging(level: str | None = None, style: str | None = None) -> None:
    """LOG_LEVEL (INFO) and LOG_FORMAT (`text`, or `json` for log collectors), on stderr."""
    handler = StderrHandler()
    handler.addFilter(RequestIdFilter())
    if (style or os.environ.get("LOG_FORMAT", "text")).lower() == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(
            TextFormatter("%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s")
        )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel((level or os.environ.get("LOG_LEVEL", "INFO")).upper())
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per Solr/LLM call is noise


class Work:
    """What serving one question has asked of the LLM so far: the door (service.api.door)
    counts only questions that called it in the LLM's pace."""

    def __init__(self) -> None:
        self.llm_calls = 0


work_var: ContextVar[Work | None] = ContextVar("work", default=None)


def count_llm_call() -> None:
    """One more LLM completion for the question being served (none outside one)."""
    work = work_var.get()
    if work is not None:
        work.llm_calls += 1
