"""Our Solr text-to-vector plugin (solr/plugins/text-to-vector): its Java tests, run by Maven
against the local model server as the embeddings endpoint (a real HTTP server, real vectors),
and the plugin inside the real Solr (solr.sh builds it into the nodes' classpath): documents
posted straight to Solr get their vectors, and `{!text_to_vector_knn}` searches by meaning.
"""

from __future__ import annotations

import io
import subprocess
import uuid
import xml.etree.ElementTree as ElementTree
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from testing.servers import free_port
from tests.conftest import ROOT

PLUGIN = ROOT / "solr" / "plugins" / "text-to-vector"


def test_the_plugins_java_tests_pass_against_the_local_model_server(
    model_server_url: str,
) -> None:
    result = subprocess.run(
        ["mvn", "-q", "-B", "test", f"-Dembeddings.endpoint={model_server_url}/v1/"],
        cwd=PLUGIN,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    reports = sorted((PLUGIN / "target" / "surefire-reports").glob("TEST-*.xml"))
    suites = [ElementTree.parse(report).getroot() for report in reports]
    assert {suite.get("name") for suite in suites} == {
        "org.solrrag.vectors.EmbeddingsEndpointTest",
        "org.solrrag.vectors.TextToVectorUpdateProcessorFactoryTest",
    }
    assert sum(int(suite.get("tests", 0)) for suite in suites) == 9
    assert all(suite.get("failures") == "0" and suite.get("errors") == "0" for suite in suites)
    assert all(suite.get("skipped") == "0" for suite in suites)


# -- the plugin in the real Solr: a collection whose vectors Solr computes -------------------

CONFIGSET = ROOT / "tests" / "fixtures" / "configsets" / "TextToVector"
PASSAGES = {
    "keeper": "The keeper of the Brannoch lighthouse lit the lamp every evening at dusk.",
    "orchard": "Apple trees are pruned in late winter, before the buds open.",
    "glacier": "The glacier survey measured how far the ice had retreated.",
}


def upload_configset(solr_url: str) -> str:
    """The test configset in ZooKeeper (once per Solr), by the Configsets API."""
    name = "TextToVector"
    listed = httpx.get(f"{solr_url}/admin/configs", params={"action": "LIST"}).json()
    if name not in listed.get("configSets", []):
        archive = io.BytesIO()
        with zipfile.ZipFile(archive, "w") as zipped:
            for path in (CONFIGSET / "conf").iterdir():
                zipped.write(path, path.name)
        httpx.post(
            f"{solr_url}/admin/configs",
            params={"action": "UPLOAD", "name": name},
            content=archive.getvalue(),
            headers={"Content-Type": "application/octet-stream"},
            timeout=60,
        ).raise_for_status()
    return name


@contextmanager
def collection(solr_url: str, endpoint: str) -> Iterator[str]:
    """A new collection of the test configset whose plugin calls `endpoint`."""
    name = f"t2v_{uuid.uuid4().hex[:8]}"
    created = httpx.get(
        f"{solr_url}/admin/collections",
        params={
            "action": "CREATE",
            "name": name,
            "collection.configName": upload_configset(solr_url),
            "numShards": 1,
            "replicationFactor": 1,
            "property.embeddings.endpoint": endpoint,
        },
        timeout=120,
    )
    assert created.status_code == 200, created.text
    try:
        yield f"{solr_url}/{name}"
    finally:
        httpx.get(
            f"{solr_url}/admin/collections",
            params={"action": "DELETE", "name": name},
            timeout=120,
        )


def post(url: str, documents: list[dict]) -> httpx.Response:
    return httpx.post(f"{url}/update", params={"commit": "true"}, json=documents, timeout=60)


def test_a_document_posted_straight_to_solr_is_found_by_meaning(
    solr_url: str, model_server_url: str
) -> None:
    with collection(solr_url, f"{model_server_url}/v1/") as url:
        documents = [{"id": key, "content": text} for key, text in PASSAGES.items()]
        response = post(url, documents)  # plain Solr: no service involved
        assert response.status_code == 200, response.text
        stored = httpx.get(f"{url}/select", params={"q": "id:keeper", "fl": "vector_384"}).json()
        assert len(stored["response"]["docs"][0]["vector_384"]) == 384
        found = httpx.get(
            f"{url}/select",
            params={"q": "{!text_to_vector_knn f=vector_384 topK=3}who lights the beacon at night?",
                    "fl": "id"},
        ).json()  # fmt: skip
        assert "response" in found, found
        ranked = [doc["id"] for doc in found["response"]["docs"]]
        assert ranked[0] == "keeper" and sorted(ranked) == sorted(PASSAGES)
        # as a filter: Solr's kNN as an fq takes the topK nearest of all, then the other
        # filters apply (the nearest is excluded here, so nothing is left)
        filtered = httpx.get(
            f"{url}/select",
            params={"q": "*:*", "fq": ["-id:keeper", "{!text_to_vector_knn f=vector_384 topK=1}"
                    "who lights the beacon at night?"], "fl": "id"},
        ).json()  # fmt: skip
        assert filtered["response"]["numFound"] == 0
        # in q, the request's filters come first (pre-filtering): the nearest that passes them
        prefiltered = httpx.get(
            f"{url}/select",
            params={"q": "{!text_to_vector_knn f=vector_384 topK=1}who lights the beacon at night?",
                    "fq": "-id:keeper", "fl": "id"},
        ).json()  # fmt: skip
        found_after_filters = [doc["id"] for doc in prefiltered["response"]["docs"]]
        assert len(found_after_filters) == 1 and found_after_filters != ["keeper"]
        # no text to embed: Solr's 400, not a call
        empty = httpx.get(
            f"{url}/select", params={"q": "{!text_to_vector_knn f=vector_384 topK=1}"}
        )
        assert empty.status_code == 400
        assert "needs text" in empty.json()["error"]["msg"]


def test_solr_and_the_service_compute_the_same_vectors(
    solr_url: str, model_server_url: str
) -> None:
    with collection(solr_url, f"{model_server_url}/v1/") as url:
        post(url, [{"id": "keeper", "content": PASSAGES["keeper"]}]).raise_for_status()
        stored = httpx.get(f"{url}/select", params={"q": "id:keeper", "fl": "vector_384"}).json()
        by_solr = stored["response"]["docs"][0]["vector_384"]
        by_service = httpx.post(
            f"{model_server_url}/v1/embeddings",
            json={"input": [PASSAGES["keeper"]], "model": "all-MiniLM-L6-v2"},
        ).json()["data"][0]["embedding"]
        assert max(abs(a - b) for a, b in zip(by_solr, by_service, strict=True)) < 1e-6


def test_with_the_endpoint_down_the_update_fails_loudly_and_indexes_nothing(
    solr_url: str,
) -> None:
    with collection(solr_url, f"http://127.0.0.1:{free_port()}/v1/") as url:
        documents = [{"id": key, "content": text} for key, text in PASSAGES.items()]
        response = post(url, documents)
        assert response.status_code == 503
        assert "3 document(s) not indexed" in response.json()["error"]["msg"]
        count = httpx.get(f"{url}/select", params={"q": "*:*", "rows": 0}).json()
        assert count["response"]["numFound"] == 0
