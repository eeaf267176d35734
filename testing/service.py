"""What the tests of the service share: its configuration written as a file, the types of the
fixtures that start it, the admin token they set."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from fastapi.testclient import TestClient

from service.config import Settings, settings_from_mapping

ROOT = Path(__file__).resolve().parent.parent
ADMIN_TOKEN = "test-admin-token"

# make_client({"key": value}) -> the service in the test's process on that configuration
ClientFactory = Callable[..., TestClient]
# service({"key": value}) -> the base URL of the service on a real socket
ServiceFactory = Callable[..., str]


def service_properties(
    solr_url: str, llm_base_url: str, model_server_url: str
) -> dict[str, object]:
    """The tests' rag.properties: the recording LLM, the local model server, that Solr, the
    stuff chain, no retries."""
    return {
        "ai.enable.rag": True,
        "ai.api.endpoint": f"{llm_base_url}/v1/",
        "ai.embeddings.endpoint": f"{model_server_url}/v1/",
        "admin.token": ADMIN_TOKEN,
        "llm.model": "test-model",
        "llm.retries": 0,
        "solr.url": solr_url,
        "prompt.templates.dir": ROOT / "prompts",
        "prompt.chunking.strategy": "stuff",
    }


def write_properties(path: Path, values: Mapping[str, object]) -> Path:
    lines = ["# written by the test suite"]
    lines += [f"{key}={_property_text(value)}" for key, value in values.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _property_text(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def test_settings(solr_url: str, model_server_url: str, **overrides: object) -> Settings:
    values = {
        "solr.url": solr_url,
        "ai.embeddings.endpoint": f"{model_server_url}/v1/",
        **{key: str(value) for key, value in overrides.items()},
    }
    return settings_from_mapping(values, source="tests", env={})


test_settings.__test__ = False  # a helper: pytest collects it where a module imports it
