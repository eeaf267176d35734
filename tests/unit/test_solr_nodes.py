"""Which Solr node a request goes to: in turn, around a failed one, back to it later."""

from __future__ import annotations

import pytest

from service.config import settings_from_mapping
from service.errors import ConfigError
from service.retrieval.nodes import MAX_NODES, REFRESH_SECONDS, RETRY_AFTER_SECONDS, SolrNodes


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


A, B, C = (f"http://{name}:8983/solr" for name in "abc")


def nodes(*urls: str, clock: Clock | None = None) -> SolrNodes:
    return SolrNodes(list(urls), clock=clock or Clock())


def test_requests_take_the_nodes_in_turn() -> None:
    three = nodes(A, B, C)
    assert [three.candidates()[0] for _ in range(6)] == [A, B, C, A, B, C]
    assert sorted(three.candidates()) == [A, B, C]  # every node is a fallback


def test_a_failed_node_rests_then_is_tried_again() -> None:
    clock = Clock()
    three = nodes(A, B, C, clock=clock)
    three.failed(B, "Solr is unreachable (ConnectError)")
    for _ in range(4):
        assert three.candidates()[-1] == B  # last resort only
    assert three.counts() == (2, 3)
    clock.now += RETRY_AFTER_SECONDS
    assert B in {three.candidates()[0] for _ in range(3)}
    three.succeeded(B)
    assert three.counts() == (3, 3)


def test_when_every_node_failed_the_soonest_back_is_tried_first() -> None:
    clock = Clock()
    two = nodes(A, B, clock=clock)
    two.failed(A, "down")
    clock.now += 1
    two.failed(B, "down")
    assert two.candidates() == [A, B]


def test_the_cluster_s_live_nodes_join_and_leave_but_configured_ones_stay() -> None:
    clock = Clock()
    one = nodes(A, clock=clock)
    assert one.claim_refresh()
    assert not one.claim_refresh()  # one refresh at a time
    one.refreshed(["a:8983_solr", "b:8983_solr", "c:8983_solr"])  # a: solr.url names a node
    assert sorted(one.candidates()) == [A, B, C]
    assert not one.claim_refresh()  # not before REFRESH_SECONDS
    clock.now += REFRESH_SECONDS
    assert one.claim_refresh()
    one.refreshed(["b:8983_solr"])  # a (configured) is kept even when the cluster omits it
    assert sorted(one.candidates()) == [A, B]


def test_behind_a_proxy_the_cluster_s_own_addresses_are_not_used() -> None:
    balancer = nodes("http://solr-lb/solr")
    balancer.claim_refresh()
    balancer.refreshed(["a:8983_solr", "b:8983_solr"])  # none of them is solr.url's
    assert balancer.candidates() == ["http://solr-lb/solr"]


def test_a_failure_asks_the_cluster_again_at_once() -> None:
    one = nodes(A, B)
    assert one.claim_refresh()
    one.refreshed(None)  # a standalone Solr: nothing learned
    assert not one.claim_refresh()
    one.failed(A, "down")
    assert one.claim_refresh()


def test_a_cluster_naming_thousands_of_nodes_is_believed_up_to_a_bound() -> None:
    one = nodes(A)
    one.claim_refresh()
    one.refreshed([f"n{i}:8983_solr" for i in range(5000)])
    assert one.counts()[1] <= MAX_NODES + 1


def test_node_names_become_base_urls_with_the_configured_scheme() -> None:
    secure = SolrNodes(["https://a:8984/solr"])
    secure.claim_refresh()
    secure.refreshed(["a:8984_solr", "b:8984_solr", "c:8984_api_solr"])
    assert "https://b:8984/solr" in secure.candidates()
    assert "https://c:8984/api/solr" in secure.candidates()


def test_the_report_says_why_a_node_is_down() -> None:
    two = nodes(A, B)
    two.failed(B, "Solr answered 503 to /FileShare/select: no leader")
    report = {entry["at"]: entry for entry in two.report()}
    assert report[A] == {"at": A, "status": "up", "served": 0}
    assert report[B]["status"] == "down" and "no leader" in str(report[B]["reason"])


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("ftp://a/solr", "must start with http"),
        (",".join([A] * 17), "at most 16"),
        (" , ", "at least one URL"),
    ],
)
def test_solr_url_refuses_what_is_not_a_list_of_nodes(value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        settings_from_mapping({"solr.url": value}, source="test", env={})


def test_solr_url_lists_several_nodes() -> None:
    settings = settings_from_mapping({"solr.url": f" {A} ,{B}/ "}, source="test", env={})
    assert SolrNodes.parse(settings.solr.url).candidates()[:2] in ([A, B], [B, A])
