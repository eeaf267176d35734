"""Our Solr text-to-vector plugin (solr/plugins/text-to-vector): its Java tests, run by Maven
against the local model server as the embeddings endpoint (a real HTTP server, real vectors).
"""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ElementTree

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
    assert sum(int(suite.get("tests", 0)) for suite in suites) == 8
    assert all(suite.get("failures") == "0" and suite.get("errors") == "0" for suite in suites)
    assert all(suite.get("skipped") == "0" for suite in suites)
