"""The service's log handler writes to stderr as it is when a record comes: a record logged
after the stream it was set up on was closed (pytest's capsys, at a fixture's teardown) is
written, never a `--- Logging error ---` (issue 67)."""

from __future__ import annotations

import asyncio
import errno
import io
import logging
import sys

import pytest

from service.api.connections import AcceptErrors
from service.observability import configure_logging


def test_a_record_goes_to_stderr_as_it_is_now(monkeypatch: pytest.MonkeyPatch) -> None:
    then = io.StringIO()
    monkeypatch.setattr(sys, "stderr", then)
    configure_logging("INFO", "text")  # the CLI's set-up, while a test captures stderr
    logging.getLogger("service.test").info("while captured")
    then.close()  # the test's captured stream, closed after it
    now = io.StringIO()
    monkeypatch.setattr(sys, "stderr", now)
    logging.getLogger("service.test").info("at a later teardown")
    assert "Logging error" not in now.getvalue()
    assert now.getvalue().endswith("INFO service.test [-] at a later teardown\n")


def test_a_burst_of_failed_accepts_is_said_once_and_its_end_once() -> None:
    """Issue 81, finding 3: out of file descriptors, asyncio logged a traceback for each
    accept() that failed (up to the backlog, 2048, every second): 68 MB of log in 15 s."""
    loop = asyncio.new_event_loop()
    records: list[logging.LogRecord] = []
    keep = logging.Handler()
    keep.emit = records.append  # type: ignore[method-assign]
    loggers = [logging.getLogger("asyncio"), logging.getLogger("service.api.connections")]
    for logger in loggers:
        logger.addHandler(keep)
    try:
        now = [0.0]
        loop.set_exception_handler(AcceptErrors(clock=lambda: now[0]))
        failed = {"message": "socket.accept() out of system resource",
                  "exception": OSError(errno.EMFILE, "Too many open files")}  # fmt: skip
        for _ in range(2048):
            loop.call_exception_handler(failed)
        (said,) = records
        assert "Too many open files" in said.getMessage() and said.exc_info is None
        handler = loop.get_exception_handler()
        assert isinstance(handler, AcceptErrors)
        now[0] = 30.0
        handler.ended(loop)  # 30 s after the last: still the burst, nothing said
        assert len(records) == 1
        now[0] = 61.0
        handler.ended(loop)
        assert "2048 accepts had failed" in records[1].getMessage()
        loop.call_exception_handler(failed)  # a new burst: said again
        assert len(records) == 3
        # anything else is reported as asyncio reports it
        loop.call_exception_handler({"message": "other", "exception": ValueError("other")})
        assert records[3].name == "asyncio" and records[3].exc_info is not None
    finally:
        for logger in loggers:
            logger.removeHandler(keep)
        loop.close()
