"""rag.properties -> Settings, with environment overrides and reload on change.

Environment variables override keys: `SOLR_RAG_` + the key upper-cased with dots as
underscores (`chunking.chunk.size` -> `SOLR_RAG_CHUNKING_CHUNK_SIZE`, `llm.maxTokens` ->
`SOLR_RAG_LLM_MAXTOKENS`); `ADMIN_TOKEN` sets `admin.token`.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import SecretStr, ValidationError

from service.config.properties import parse_properties
from service.config.settings import Settings, known_keys

log = logging.getLogger(__name__)

ENV_PREFIX = "SOLR_RAG_"


class ConfigError(Exception):
    """rag.properties (or an override) holds a value the service cannot run with."""


def env_name(key: str) -> str:
    return ENV_PREFIX + key.upper().replace(".", "_")


def settings_from_mapping(
    values: Mapping[str, str], *, source: str, env: Mapping[str, str] | None = None
) -> Settings:
    """Validate raw key/value strings (plus env overrides); the error names every bad key."""
    keys = known_keys()
    raw: dict[str, str] = {}
    for key, value in values.items():
        if key not in keys:
            log.warning("%s: unknown key %r ignored (known keys: see rag.properties)", source, key)
            continue
        raw[key] = value
    for key in keys:
        if env and env_name(key) in env:
            raw[key] = env[env_name(key)]
    if env and env.get("ADMIN_TOKEN"):
        raw["admin.token"] = env["ADMIN_TOKEN"]

    fields = Settings.model_fields
    cleaned = {
        key: value.strip()
        for key, value in raw.items()
        if value.strip() or fields[keys[key]].annotation in (str, SecretStr)
    }
    try:
        return Settings.model_validate(cleaned)
    except ValidationError as error:
        problems = []
        for item in error.errors():
            key = str(item["loc"][0]) if item["loc"] else "?"
            shown = "***" if "token" in key else repr(cleaned.get(key, ""))
            problems.append(f"{key} = {shown}: {item['msg']}")
        raise ConfigError(f"{source}: invalid value(s): " + "; ".join(problems)) from None


def load_settings(path: Path, env: Mapping[str, str] | None = None) -> Settings:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {error.strerror}") from None
    return settings_from_mapping(parse_properties(text), source=str(path), env=env)


@dataclass(frozen=True)
class _Stamp:
    mtime_ns: int
    size: int


class ConfigStore:
    """Holds the current Settings and reloads them when rag.properties changes.

    A reload that fails validation keeps the previous settings (and logs why); only the first
    load raises, so a bad file stops the service at startup.
    """

    def __init__(self, path: Path, env: Mapping[str, str] | None = None) -> None:
        self.path = path
        self._env = os.environ if env is None else env
        self._lock = threading.Lock()
        self._stamp = self._read_stamp()
        self._settings = load_settings(path, self._env)

    def current(self) -> Settings:
        stamp = self._read_stamp()
        if stamp != self._stamp:
            with self._lock:
                if stamp != self._stamp:
                    self._reload(stamp)
        return self._settings

    def _reload(self, stamp: _Stamp | None) -> None:
        self._stamp = stamp
        try:
            self._settings = load_settings(self.path, self._env)
            log.info("configuration reloaded from %s", self.path)
        except ConfigError as error:
            log.error("configuration not reloaded, keeping the previous one: %s", error)

    def _read_stamp(self) -> _Stamp | None:
        try:
            stat = self.path.stat()
        except OSError:
            return None
        return _Stamp(stat.st_mtime_ns, stat.st_size)
