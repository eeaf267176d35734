"""rag.properties -> Settings, with environment overrides, reload on change, and edits.

Environment variables override keys: `SOLR_RAG_` + the key upper-cased with dots as
underscores (`chunking.chunk.size` -> `SOLR_RAG_CHUNKING_CHUNK_SIZE`, `llm.maxTokens` ->
`SOLR_RAG_LLM_MAXTOKENS`); a secret key may instead be read from the file its variable + `_FILE`
names (`SOLR_RAG_SOLR_AUTH_PASSWORD_FILE`, for Docker secrets); `ADMIN_TOKEN` (or a file named
by `ADMIN_TOKEN_FILE`) sets `admin.token`. A secret's file is watched as rag.properties is: a
password rotated there is read again, the service not restarted.

Datafari's agentic-custom-tools.json beside rag.properties (service.config.custom_tools) is
read and checked with it: the config is the two files.

Edits (`ConfigStore.update`) are validated as a whole file before anything is written, then
written atomically (temp file + rename), one at a time across threads and processes (a lock
file beside rag.properties), so no accepted change is ever lost or half-written.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import re
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from functools import cache
from pathlib import Path

from pydantic import SecretStr, ValidationError

from service.config.custom_tools import FILE_NAME, CustomTool, checked_custom_tools
from service.config.properties import parse_properties, with_values
from service.config.settings import UNNAMED_MODELS, Settings, key_field, known_keys
from service.errors import ConfigConflict, ConfigError

log = logging.getLogger(__name__)

ENV_PREFIX = "SOLR_RAG_"


# Names Datafari's documentation still shows for today's keys: a Datafari rag.properties starts
# the service as it is (one warning each; the admin page and edits use the new name).
LEGACY_KEYS = {
    "rag.api.token": "ai.api.token",
    "rag.api.endpoint": "ai.api.endpoint",
    "rag.model": "llm.model",
    "llm.max.request.size": "prompt.max.request.size",
}


def env_name(key: str) -> str:
    return ENV_PREFIX + key.upper().replace(".", "_")


def settings_from_mapping(
    values: Mapping[str, str], *, source: str, env: Mapping[str, str] | None = None
) -> Settings:
    """Validate raw key/value strings (plus env overrides); the error names every bad key."""
    keys = set(known_keys())
    raw: dict[str, str] = {}
    for key, value in values.items():
        if key in LEGACY_KEYS:
            continue
        if key not in keys:
            log.warning("%s: unknown key %r ignored (known keys: see rag.properties)", source, key)
            continue
        raw[key] = value
    for old, new in LEGACY_KEYS.items():
        if old in values:
            kept = "read as" if new not in raw else f"ignored: {new} is set too, and wins; remove"
            log.warning("%s: %s is the former name of %s, %s it", source, old, new, kept)
            raw.setdefault(new, values[old])
    _embeddings_model_from_solr(raw)
    for key in keys:
        setting = env_source(key, env or {})  # not `source`: the error names that one
        if setting is None:
            continue
        variable, from_file = setting
        raw[key] = _secret_file(variable, env[variable]) if from_file else env[variable]

    cleaned = {
        key: value.strip()
        for key, value in raw.items()
        if value.strip() or key_field(key).annotation in (str, SecretStr)
    }
    try:
        return Settings.of(cleaned)
    except ValidationError as error:
        problems = []
        for item in error.errors():
            key = str(item["loc"][-1]) if item["loc"] else ""
            if key not in keys:  # a rule over several keys: its message names them
                problems.append(str(item["msg"]).removeprefix("Value error, "))
                continue
            shown = "***" if key in secret_keys() else repr(shown_value(key, cleaned.get(key, "")))
            problems.append(f"{key} = {shown}: {item['msg']}")
        raise ConfigError(f"{source}: invalid value(s): " + "; ".join(problems)) from None


def shown_value(key: str, value: str) -> str:
    """A value of `key` as a log line, an error or a response may show it: a URL's
    `user:password@` masked, and a user key's `user:password` (a login pasted whole) shown as
    `user:***`; never echoed."""
    value = re.sub(r"(://)[^/@\s]*@", r"\1***@", value)
    if key in user_keys() and ":" in value:
        return value.split(":", 1)[0] + ":***"
    return value


def user_keys() -> frozenset[str]:
    """Keys naming a login's user (solr.auth.user, solr.zk.digest.user): where a login may be
    pasted whole (`user:password`), so a value with `:` is shown masked."""
    return frozenset(key for key in known_keys() if key.endswith(".user"))


def _embeddings_model_from_solr(raw: dict[str, str]) -> None:
    """Datafari names the embeddings model in solr.embeddings.model only: it is then the model
    the embeddings API is asked for. Both named and different: Settings refuses (the query
    would be embedded by another model than the passages)."""
    named = raw.get("solr.embeddings.model", "").strip()
    if named not in UNNAMED_MODELS and not raw.get("ai.embeddings.model", "").strip():
        raw["ai.embeddings.model"] = named


def _former_names(
    before: Mapping[str, str], changes: Mapping[str, str | None]
) -> dict[str, str | None]:
    """The legacy lines an edit replaces: removed, so the file says each value once."""
    return {old: None for old, new in LEGACY_KEYS.items() if new in changes and old in before}


def _secret_file(variable: str, path: str) -> str:
    """A secret read from the file a `<VARIABLE>_FILE` names (Docker secrets, a volume of
    generated credentials): its text, without the line's end."""
    try:
        secret = Path(path).read_text(encoding="utf-8").strip()
    except OSError as error:
        raise ConfigError(f"cannot read {variable} ({path}): {error.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"cannot read {variable} ({path}): not UTF-8 text") from None
    if not secret:  # never "no secret" silently: rag.properties' own value would serve
        raise ConfigError(f"{variable} names an empty file ({path}): write the secret in it")
    return secret


def secret_files(env: Mapping[str, str]) -> tuple[Path, ...]:
    """The files the environment reads secrets from (`<VARIABLE>_FILE` of a secret key, or
    ADMIN_TOKEN_FILE), in a fixed order: watched for a rotated secret."""
    names = [env_name(key) + "_FILE" for key in sorted(secret_keys())]
    return tuple(Path(env[name]) for name in [*names, "ADMIN_TOKEN_FILE"] if env.get(name))


def env_source(key: str, env: Mapping[str, str]) -> tuple[str, bool] | None:
    """The environment variable that sets `key` instead of rag.properties, and whether it
    names a file holding the value; None: the file's value stands. `ADMIN_TOKEN` (or
    `ADMIN_TOKEN_FILE`) first for admin.token; then the key's own variable when not empty;
    then, for a secret, `<VARIABLE>_FILE`; then the key's own variable set empty (a blank
    value: `SOLR_RAG_AI_API_TOKEN: ${AI_API_TOKEN:-}` in a compose file sets the token blank,
    unless a `_FILE` gives it)."""
    variable = env_name(key)
    named = [variable]
    if key == "admin.token":
        named = ["ADMIN_TOKEN", "ADMIN_TOKEN_FILE", variable]
    if key in secret_keys():
        named.append(variable + "_FILE")
    for name in named:
        if env.get(name):
            return name, name.endswith("_FILE") and name != variable
    return (variable, False) if variable in env else None


@cache
def secret_keys() -> frozenset[str]:
    """Keys whose values are never shown (tokens): the Settings class's, read once (a
    settings' reading asks it of each of its 168 keys)."""
    return frozenset(key for key in known_keys() if key_field(key).annotation is SecretStr)


def load_settings(path: Path, env: Mapping[str, str] | None = None) -> Settings:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {error.strerror}") from None
    return settings_from_mapping(parse_properties(text), source=str(path), env=env)


# What tells a file changed: (mtime_ns, size, inode, ctime_ns). A rewrite of the same length
# in the same second (`cp -p` of a rotated secret) has another inode or ctime, a mode fixed
# after a failed read another ctime. A plain tuple: compared at every request, cheaply.
_Stamp = tuple[int, int, int, int]


class ConfigStore:
    """Holds the current Settings and reloads them when rag.properties changes.

    A reload that fails validation keeps the previous settings (and logs why); only the first
    load raises, so a bad file stops the service at startup. The custom agent's tools
    (agentic-custom-tools.json beside it) are read and kept with them, and the secrets of
    `*_FILE` variables: each reloaded when any of these files changes.
    """

    def __init__(self, path: Path, env: Mapping[str, str] | None = None) -> None:
        self.path = path
        self._env = os.environ if env is None else env
        # reentrant: a check run under it (update's) may read the settings in force
        self._lock = threading.RLock()
        self._secret_files = secret_files(self._env)
        # read with rag.properties: the custom agent's tools, then the secrets' files
        self._others_paths = tuple(map(str, (path.parent / FILE_NAME, *self._secret_files)))
        self._stamp = self._read_stamp()
        self._others = self._read_others()
        self._settings = load_settings(path, self._env)
        self._tools = checked_custom_tools(path.parent)

    def current(self) -> Settings:
        stamps = self._read_stamp(), self._read_others()
        if stamps != (self._stamp, self._others):
            with self._lock:
                if stamps != (self._stamp, self._others):
                    self._reload(*stamps)
        return self._settings

    def custom_tools(self) -> Mapping[str, CustomTool]:
        """The custom agent's tools, as read with the current settings (none without a file)."""
        self.current()
        return self._tools

    def version(self) -> str:
        """A fingerprint of the file as it is now: what `update(expected_version=)` compares."""
        return _fingerprint(self._read_text())

    def overridden_by_env(self, key: str) -> str | None:
        """The environment variable that sets `key` instead of the file, if any (a secret's
        `<VARIABLE>_FILE` too): `env_source`, the rule the settings are read by."""
        source = env_source(key, self._env)
        return None if source is None else source[0]

    def preview(self, changes: Mapping[str, str | None]) -> Settings:
        """The Settings `update(changes)` would give now, validated, without writing."""
        self._check_keys(changes)
        return self._apply(parse_properties(self._read_text()), changes)

    def as_is(self) -> Settings | None:
        """The Settings of rag.properties as it is now (None: it is not valid now), which may
        not be the settings in force yet (a reload that failed)."""
        try:
            return self._apply(parse_properties(self._read_text()), {})
        except ConfigError:
            return None

    def update(
        self,
        changes: Mapping[str, str | None],
        *,
        expected_version: str | None = None,
        check: Callable[[Settings | None, Settings], None] | None = None,
    ) -> tuple[Settings, str]:
        """Sets keys of rag.properties (values as they would be written there; None removes
        the key, so its default applies) and returns the new Settings and version. Raises
        ConfigError naming the key when a change is invalid, ConfigConflict when the file is
        no longer `expected_version`; the file is then untouched. `check(as_is, after)` is
        called with the file locked, on what it holds then (None: not valid) and what the
        change makes of it: what it raises leaves the file untouched (no edit meanwhile can
        slip between a check and the write)."""
        self._check_keys(changes)
        with self._lock, _exclusive(self.path):
            text = self._read_text()
            if expected_version is not None and expected_version != _fingerprint(text):
                raise ConfigConflict(
                    f"{self.path.name} changed since version {expected_version}; reload it "
                    "and apply your change again"
                )
            before = parse_properties(text)
            settings = self._apply(before, changes)
            if check is not None:
                try:
                    as_is: Settings | None = self._apply(before, {})
                except ConfigError:
                    as_is = None
                check(as_is, settings)
            edited = with_values(text, {**_former_names(before, changes), **changes})
            _write_atomically(self.path, edited)
            self._settings = settings
            self._stamp = self._read_stamp()
        self._log_changes(before, changes)
        return settings, _fingerprint(edited)

    def _check_keys(self, changes: Mapping[str, str | None]) -> None:
        keys = set(known_keys())
        for key in changes:
            if key not in keys:
                raise ConfigError(f"{key}: unknown key (see rag.properties for the known ones)")
            variable = self.overridden_by_env(key)
            if variable:
                raise ConfigError(
                    f"{key}: set by the environment variable {variable}, which wins over "
                    "rag.properties; change it there"
                )

    def _apply(self, before: Mapping[str, str], changes: Mapping[str, str | None]) -> Settings:
        values = {**before, **_former_names(before, changes), **changes}
        kept = {key: value for key, value in values.items() if value is not None}
        return settings_from_mapping(kept, source=self.path.name, env=self._env)

    def _log_changes(self, before: Mapping[str, str], changes: Mapping[str, str | None]) -> None:
        hidden = secret_keys()
        for key, value in changes.items():
            old = before.get(key, "")
            if old == value:
                continue
            new = "(default)" if value is None else value
            if key in hidden:
                shown_old, shown_new = "***", "***"
            else:
                shown_old, shown_new = shown_value(key, old), shown_value(key, new)
            log.info(
                "configuration changed: %s: %r -> %r",
                key,
                shown_old,
                shown_new,
                extra={"key": key, "old": shown_old, "new": shown_new},
            )

    def _read_text(self) -> str:
        try:
            return self.path.read_text(encoding="utf-8")
        except OSError as error:
            raise ConfigError(f"cannot read {self.path}: {error.strerror}") from None

    def _reload(self, stamp: _Stamp | None, others: tuple[_Stamp | None, ...]) -> None:
        self._stamp, self._others = stamp, others
        try:
            settings = load_settings(self.path, self._env)
            tools = checked_custom_tools(self.path.parent)
        except ConfigError as error:
            log.error("configuration not reloaded, keeping the previous one: %s", error)
            return
        except Exception as error:  # a file no check foresaw: still the previous one serves
            log.error(
                "configuration not reloaded, keeping the previous one: %s reading %s",
                type(error).__name__,
                self.path.parent,
            )
            return
        self._settings, self._tools = settings, tools
        log.info("configuration reloaded from %s", self.path)

    def _read_stamp(self) -> _Stamp | None:
        return _stamp_of(str(self.path))

    def _read_others(self) -> tuple[_Stamp | None, ...]:
        """The stamps of the files read with rag.properties: the custom agent's tools, then
        the secrets' files."""
        return tuple(map(_stamp_of, self._others_paths))


def _stamp_of(path: str) -> _Stamp | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size, stat.st_ino, stat.st_ctime_ns


def _fingerprint(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@contextmanager
def _exclusive(path: Path) -> Iterator[None]:
    """One writer at a time, across processes (several workers, the CLI)."""
    lock_path = path.with_name(f".{path.name}.lock")
    with open(lock_path, "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _write_atomically(path: Path, text: str) -> None:
    """Readers see the old file or the new one, never a part: temp file, fsync, rename."""
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(temporary, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        with suppress(OSError):
            os.chmod(temporary, path.stat().st_mode & 0o7777)
        os.replace(temporary, path)
    except OSError as error:
        with suppress(OSError):
            temporary.unlink()
        raise ConfigError(
            f"cannot write {path}: {error.strerror} (in Docker, mount the folder that holds "
            "rag.properties, not the file: a file mount cannot be replaced)"
        ) from None
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
