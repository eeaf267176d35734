"""Review of issue 67: agentic-custom-tools.json that json.loads refuses with a plain ValueError
(an integer of more digits than Python converts: 4,300) escapes CustomToolsError: a traceback at
start instead of the ConfigError naming the file, and, while serving, an exception out of
ConfigStore.current() (the request that notices the change fails; the reload is dropped)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from service.agents.custom import FILE_NAME
from service.config import ConfigStore
from service.errors import ConfigError
from tests.unit.test_custom_tools import SEARCH, config_beside, write

HUGE_NUMBER = "[" + "9" * 5000 + "]"  # 5 KB, well within MAX_FILE_BYTES


def test_a_file_with_a_huge_number_stops_the_start_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / FILE_NAME).write_text(HUGE_NUMBER)
    with pytest.raises(ConfigError):
        ConfigStore(config_beside(tmp_path), env={})


def test_a_file_with_a_huge_number_while_serving_keeps_the_last_good_tools(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write(tmp_path, [SEARCH])
    store = ConfigStore(config_beside(tmp_path), env={})
    kept = store.custom_tools()
    (tmp_path / FILE_NAME).write_text(HUGE_NUMBER)
    with caplog.at_level(logging.ERROR, logger="service.config.store"):
        assert store.custom_tools() is kept  # raises ValueError today
    assert "configuration not reloaded" in caplog.text
