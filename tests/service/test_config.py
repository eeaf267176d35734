"""rag.properties: parsing, validation, environment overrides, hot reload."""

from __future__ import annotations

import logging
import os
import re
import time
from pathlib import Path

import pytest

from service.api.app import create_app
from service.config import ConfigStore, load_settings
from service.config.properties import parse_properties, with_values
from service.config.settings import known_keys
from service.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]

DATAFARI_KEYS = {
    "ai.enable.rag": "false",
    "ai.enable.summarization": "false",
    "ai.llm.service": "openai",
    "ai.api.endpoint": "https://api.openai.com/v1/",
    "ai.api.token": "",
    "llm.model": "gpt-3.5-turbo",
    "llm.temperature": "0",
    "llm.maxTokens": "200",
    "chunking.enable": "true",
    "chunking.chunk.size": "3000",
    "chunking.maxFiles": "3",
    "rag.operator": "OR",
    "prompt.chunking.strategy": "refine",
    "prompt.max.request.size": "40000",
    "chat.memory.enabled": "false",
    "chat.query.rewriting.enabled": "false",
    "chat.memory.history.size": "6",
    "solr.enable.vector.search": "false",
    "solr.embeddings.model": "default_model",
    "solr.topK": "10",
}


def test_parse_properties_follows_java_rules() -> None:
    text = (
        "# comment\n! also a comment\n"
        "a=1\nb : two\nc three\n"
        "d=first \\\n    second\n"
        "e=tab\\there\\u00e9\n"
        "  f = spaced  \n"
        "g=\n"
        "a=later wins\n"
    )
    assert parse_properties(text) == {
        "a": "later wins",
        "b": "two",
        "c": "three",
        "d": "first second",
        "e": "tab\there\u00e9",
        "f": "spaced  ",
        "g": "",
    }


def test_defaults_are_datafaris(tmp_path: Path) -> None:
    empty = tmp_path / "rag.properties"
    empty.write_text("")
    settings = load_settings(empty, {})
    by_alias = settings.values()
    for key, expected in DATAFARI_KEYS.items():
        value = by_alias[key]
        shown = value.get_secret_value() if hasattr(value, "get_secret_value") else value
        assert str(shown).lower() == expected.lower() or float(shown) == float(expected), key


def test_shipped_rag_properties_lists_every_key_and_is_valid() -> None:
    path = ROOT / "rag.properties"
    text = path.read_text()
    commented = parse_properties(re.sub(r"(?m)^#(?=[\w.]+=)", "", text))
    assert set(known_keys()) <= set(commented)  # set, or shown with its default as "#key="
    settings = load_settings(path, {})
    assert settings.server.enable_rag is True
    # Datafari's switch is not left saying one thing while another runs
    assert "solr.enable.vector.search" not in parse_properties(text)
    assert settings.retrieval.in_force == "hybrid"


def test_invalid_value_names_the_key(tmp_path: Path) -> None:
    path = tmp_path / "rag.properties"
    path.write_text("chunking.chunk.size=big\nrag.operator=XOR\n")
    with pytest.raises(ConfigError) as raised:
        load_settings(path, {})
    assert "chunking.chunk.size" in str(raised.value)
    assert "rag.operator" in str(raised.value)


def test_invalid_token_value_is_not_echoed(tmp_path: Path) -> None:
    path = tmp_path / "rag.properties"
    path.write_text("llm.maxTokens=-5\n")
    with pytest.raises(ConfigError, match=r"llm\.maxTokens"):
        load_settings(path, {})


def test_service_refuses_to_start_on_invalid_config(tmp_path: Path) -> None:
    path = tmp_path / "rag.properties"
    path.write_text("llm.temperature=7\n")
    with pytest.raises(ConfigError, match=r"llm\.temperature"):
        create_app(path)


def test_unknown_key_is_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "rag.properties"
    path.write_text("ai.enable.rag=true\nmystery.key=1\n")
    with caplog.at_level(logging.WARNING):
        settings = load_settings(path, {})
    assert settings.server.enable_rag is True
    assert "mystery.key" in caplog.text


def test_environment_overrides_the_file(tmp_path: Path) -> None:
    path = tmp_path / "rag.properties"
    path.write_text("chunking.maxFiles=3\nllm.maxTokens=100\n")
    env = {"SOLR_RAG_CHUNKING_MAXFILES": "7", "SOLR_RAG_LLM_MAXTOKENS": "50", "ADMIN_TOKEN": "t"}
    settings = load_settings(path, env)
    assert (settings.retrieval.max_files, settings.llm.max_tokens) == (7, 50)
    assert settings.security.admin_token.get_secret_value() == "t"


def test_blank_model_means_the_apis_default(tmp_path: Path) -> None:
    path = tmp_path / "rag.properties"
    path.write_text("llm.model=\nchunking.maxFiles=\n")
    settings = load_settings(path, {})
    assert settings.llm.model == ""
    assert settings.retrieval.max_files == 3


def _rewrite(path: Path, text: str) -> None:
    before = path.stat().st_mtime_ns
    path.write_text(text)
    if path.stat().st_mtime_ns == before:  # coarse clocks: make the change visible
        os.utime(path, ns=(before + 1_000_000, before + 1_000_000))


def test_store_reloads_a_changed_file(tmp_path: Path) -> None:
    path = tmp_path / "rag.properties"
    path.write_text("chunking.maxFiles=3\n")
    store = ConfigStore(path, env={})
    assert store.current().retrieval.max_files == 3
    _rewrite(path, "chunking.maxFiles=5\n")
    assert store.current().retrieval.max_files == 5


def test_store_keeps_the_last_good_config_when_the_file_breaks(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "rag.properties"
    path.write_text("chunking.maxFiles=4\n")
    store = ConfigStore(path, env={})
    time.sleep(0.01)
    _rewrite(path, "chunking.maxFiles=lots\n")
    with caplog.at_level(logging.ERROR):
        assert store.current().retrieval.max_files == 4
    assert "chunking.maxFiles" in caplog.text


def test_a_secret_rotated_in_its_file_is_read_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Docker and Kubernetes secrets are files: a password rotated there is the one the
    next request uses, rag.properties untouched; a file that goes missing mid-rotation keeps
    the last secret read (and says why), and its return is read."""
    path = tmp_path / "rag.properties"
    path.write_text("solr.auth.user=reader\n")
    secret, token = tmp_path / "solr.password", tmp_path / "admin.token"
    secret.write_text("first-password\n")
    token.write_text("first-token")
    env = {"SOLR_RAG_SOLR_AUTH_PASSWORD_FILE": str(secret), "ADMIN_TOKEN_FILE": str(token)}
    store = ConfigStore(path, env=env)
    password = lambda: store.current().solr.auth_password.get_secret_value()  # noqa: E731
    assert password() == "first-password"
    _rewrite(secret, "second-password\n")
    assert password() == "second-password"
    _rewrite(token, "second-token")
    assert store.current().security.admin_token.get_secret_value() == "second-token"
    secret.unlink()
    with caplog.at_level(logging.ERROR):
        assert password() == "second-password"
    assert "SOLR_RAG_SOLR_AUTH_PASSWORD_FILE" in caplog.text and "second" not in caplog.text
    secret.write_text("third-password")
    assert password() == "third-password"


def test_a_rotation_that_keeps_length_and_time_or_a_mode_fixed_is_seen(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`cp -p` of a rotated secret of the same length keeps size and mtime: the file is
    another one (its inode), still read again; a secret first unreadable (mode 000), then
    made readable by chmod alone, is read at the next request."""
    path = tmp_path / "rag.properties"
    path.write_text("solr.auth.user=reader\n")
    secret, staged = tmp_path / "solr.password", tmp_path / "staged.password"
    secret.write_text("password-1")
    env = {"SOLR_RAG_SOLR_AUTH_PASSWORD_FILE": str(secret)}
    store = ConfigStore(path, env=env)
    password = lambda: store.current().solr.auth_password.get_secret_value()  # noqa: E731
    assert password() == "password-1"
    before = secret.stat()
    staged.write_text("password-2")
    os.utime(staged, ns=(before.st_atime_ns, before.st_mtime_ns))
    staged.replace(secret)  # same size, same mtime: another file
    assert (secret.stat().st_size, secret.stat().st_mtime_ns) == (
        before.st_size,
        before.st_mtime_ns,
    )
    assert password() == "password-2"
    # a mode changed, nothing else (a failed read mended by chmod): read again, as the log says
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="service.config.store"):
        secret.chmod(0o640)
        assert password() == "password-2"
    assert "configuration reloaded" in caplog.text
    if os.geteuid() == 0:
        return  # root reads a file of mode 000: no failed read to mend
    secret.chmod(0)
    _rewrite(secret, "password-3")
    with caplog.at_level(logging.ERROR):
        assert password() == "password-2"  # unreadable: the last one kept
    assert "SOLR_RAG_SOLR_AUTH_PASSWORD_FILE" in caplog.text
    secret.chmod(0o600)  # the mode mended, nothing else
    assert password() == "password-3"


@pytest.mark.parametrize("variable", ["SOLR_RAG_AI_API_TOKEN_FILE", "ADMIN_TOKEN_FILE"])
def test_an_empty_secret_file_is_an_error_not_the_files_value(
    tmp_path: Path, variable: str
) -> None:
    """An empty secret file (a secret not yet written, a volume not mounted) never falls
    back to rag.properties' own token: the service does not start, and names the variable."""
    path = tmp_path / "rag.properties"
    path.write_text("ai.api.token=from-the-file\nadmin.token=from-the-file\n")
    empty = tmp_path / "secret"
    empty.write_text("\n")
    with pytest.raises(ConfigError, match=f"{variable} names an empty file"):
        ConfigStore(path, env={variable: str(empty)})
    empty.write_text("given")
    store = ConfigStore(path, env={variable: str(empty)})
    _rewrite(empty, "")
    settings = store.current()  # a reload that fails keeps the secret last read
    key = "ai.api.token" if variable.startswith("SOLR_RAG") else "admin.token"
    assert settings.value(key).get_secret_value() == "given"


# -- editing rag.properties ------------------------------------------------------------------


def test_editing_rewrites_only_the_changed_keys() -> None:
    text = "# head\na=1\n\n! note\nb = two \\\n   continued\nunknown=kept\na=again\n"
    edited = with_values(text, {"a": "X", "b": "new", "c": "added"})
    assert edited == "# head\na=X\n\n! note\nb=new\nunknown=kept\n\nc=added\n"


@pytest.mark.parametrize(
    "value", ["plain", " leading space", "back\\slash", "two\nlines", "tab\there", "été ü 中文", ""]
)
def test_edited_values_read_back_unchanged(value: str) -> None:
    assert parse_properties(with_values("k=old\n", {"k": value}))["k"] == value


# -- Datafari's names and meanings (issue 17) --------------------------------------------------


def test_legacy_key_names_are_read_as_todays(tmp_path: Path) -> None:
    path = tmp_path / "rag.properties"
    path.write_text(
        "rag.api.endpoint=http://llm.example/v1/\nrag.api.token=t0ken\nrag.model=m1\n"
        "llm.max.request.size=30000\ninMemory.maxChunks=7\nrag.enable.vector.search=true\n"
    )
    settings = load_settings(path, {})
    assert settings.llm.endpoint == "http://llm.example/v1/"
    assert settings.llm.token.get_secret_value() == "t0ken"
    assert (settings.llm.model, settings.prompt.max_request_size) == ("m1", 30000)
    # Datafari's InMemory vector search: its own keys, not Solr vector search's (issue 32)
    retrieval = settings.retrieval
    assert (retrieval.in_memory, retrieval.in_memory_chunks, retrieval.in_force) == (
        True,
        7,
        "bm25",
    )


def test_todays_name_wins_and_an_edit_removes_the_former_line(tmp_path: Path) -> None:
    path = tmp_path / "rag.properties"
    path.write_text("rag.model=old\nllm.model=new\n")
    store = ConfigStore(path, env={})
    assert store.current().llm.model == "new"
    store.update({"llm.model": None})  # back to the default: the former name must not return
    assert store.current().llm.model == "gpt-3.5-turbo"
    assert "rag.model" not in path.read_text()


def test_solr_embeddings_model_names_the_model_or_must_agree(tmp_path: Path) -> None:
    path = tmp_path / "rag.properties"
    path.write_text("solr.embeddings.model=text-embedding-3-small\n")
    assert load_settings(path, {}).embeddings.model == "text-embedding-3-small"
    path.write_text("solr.embeddings.model=default_model\n")
    assert load_settings(path, {}).embeddings.model == "all-MiniLM-L6-v2"
    path.write_text("solr.embeddings.model=bge-small\nai.embeddings.model=all-MiniLM-L6-v2\n")
    with pytest.raises(ConfigError, match=r"solr\.embeddings\.model.*cannot be compared"):
        load_settings(path, {})


@pytest.mark.parametrize(
    ("lines", "in_force"),
    [
        ("solr.enable.vector.search=true\n", "vector"),
        ("solr.enable.vector.search=false\n", "bm25"),
        ("solr.enable.vector.search=true\nretrieval.method=bm25\n", "bm25"),
        ("solr.enable.vector.search=false\nretrieval.method=hybrid\n", "hybrid"),
        ("retrieval.method=\n", "bm25"),
    ],
)
def test_datafaris_switch_decides_unless_retrieval_method_is_set(
    tmp_path: Path, lines: str, in_force: str
) -> None:
    path = tmp_path / "rag.properties"
    path.write_text(lines)
    assert load_settings(path, {}).retrieval.in_force == in_force
