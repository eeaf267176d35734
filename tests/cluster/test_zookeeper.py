"""solr.zk.hosts: the service reads the cluster's live nodes in ZooKeeper, so it finds the
cluster even when no node solr.url names answers, and goes on with solr.url's nodes when
ZooKeeper cannot be asked."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from service.config import settings_from_mapping
from service.errors import ConfigError
from service.retrieval import SolrClient
from service.retrieval.nodes import SolrNodes
from service.retrieval.zookeeper import ZooKeeperUnavailable, live_nodes
from testing.servers import free_port
from testing.solr import LocalSolr


def search(solr_url: str, zk_hosts: str) -> tuple[int, list[dict[str, object]]]:
    """FileShare's document count, asked through the nodes these settings describe, and what
    the client then knows of each node."""
    layout = settings_from_mapping(
        {"solr.url": solr_url, "solr.zk.hosts": zk_hosts}, source="tests", env={}
    ).solr

    async def run() -> tuple[int, list[dict[str, object]]]:
        async with httpx.AsyncClient() as http:
            solr = SolrClient(http, SolrNodes.configured(layout), connect_timeout=1)
            found = await solr.select("FileShare", {"q": "*:*", "defType": "lucene", "rows": 0})
            return found["response"]["numFound"], solr.nodes.report()

    return asyncio.run(run())


def test_zookeeper_names_the_cluster_s_live_nodes(cluster: LocalSolr) -> None:
    names, scheme = live_nodes(cluster.zk_host, 5)
    urls = sorted(f"{scheme}://{name.replace('_', '/')}" for name in names)
    assert urls == sorted(cluster.urls)
    with pytest.raises(ZooKeeperUnavailable, match="within"):
        live_nodes(f"127.0.0.1:{free_port()}", 1)


@pytest.mark.usefixtures("cluster_corpus")
def test_with_zookeeper_the_cluster_is_found_when_solr_url_s_node_is_gone(
    cluster: LocalSolr,
) -> None:
    gone = f"http://127.0.0.1:{free_port()}/solr"  # no Solr there
    documents, nodes = search(gone, cluster.zk_host)
    assert documents > 0
    known = {node["at"]: node for node in nodes}
    assert set(known) == {gone, *cluster.urls}
    assert all(known[url]["status"] == "up" for url in cluster.urls)


@pytest.mark.usefixtures("cluster_corpus")
def test_with_zookeeper_down_solr_url_s_nodes_serve(cluster: LocalSolr) -> None:
    documents, nodes = search(cluster.url, f"127.0.0.1:{free_port()}")
    assert documents > 0
    # the live nodes were learned from solr.url's node instead (CLUSTERSTATUS)
    assert {node["at"] for node in nodes} == set(cluster.urls)


@pytest.mark.parametrize("hosts", ["zoo 1:2181", "zoo1", "zoo1:2181;rm -rf", "http://zoo1:2181"])
def test_an_unusable_connect_string_is_refused_naming_the_key(hosts: str) -> None:
    with pytest.raises(ConfigError, match=r"solr\.zk\.hosts"):
        settings_from_mapping({"solr.zk.hosts": hosts}, source="tests", env={})


def test_a_connect_string_may_name_several_hosts_and_a_chroot() -> None:
    hosts = "zoo1:2181,zoo2.example.org:2181,10.0.0.3:2181/solr"
    layout = settings_from_mapping({"solr.zk.hosts": hosts}, source="tests", env={}).solr
    assert SolrNodes.configured(layout).zk_hosts == hosts
