"""The service's log handler writes to stderr as it is when a record comes: a record logged
after the stream it was set up on was closed (pytest's capsys, at a fixture's teardown) is
written, never a `--- Logging error ---` (issue 67)."""

from __future__ import annotations

import io
import logging
import sys

import pytest

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
