"""The Solr nodes the service may ask, and what it knows of each.

`solr.url` lists one node or several; in SolrCloud the cluster's live nodes are learned too
(from ZooKeeper when solr.zk.hosts names it, else CLUSTERSTATUS; every REFRESH_SECONDS and
after a failure), when solr.url names nodes of the cluster itself or ZooKeeper is named:
behind a proxy or a load balancer, the nodes' own addresses may not be reachable from here, and
the balancer already spreads the load. Requests take the nodes in turn;
a node that refused a connection or answered 503 rests RETRY_AFTER_SECONDS, then is tried
again, so a dead node costs one failed connection and a node that comes back gets traffic.
Shared by every request of a process (the Runtime keeps one per solr.url).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from service.config.settings import SolrSettings

MAX_NODES = 64  # the cluster says how many nodes it has: we believe up to this many
RETRY_AFTER_SECONDS = 5.0
REFRESH_SECONDS = 30.0


@dataclass
class NodeState:
    url: str
    configured: bool  # listed in solr.url (kept), or learned from the cluster (may go)
    failures: int = 0  # in a row
    served: int = 0  # calls answered
    last_error: str = ""
    resting_until: float = 0.0

    def report(self, now: float) -> dict[str, object]:
        """The node's state for an operator (the admin's health check)."""
        state: dict[str, object] = {
            "at": self.url,
            "status": "up" if self.failures == 0 else "down",
            "served": self.served,
        }
        if self.failures:
            state.update(failures=self.failures, reason=self.last_error)
            state["retry_in_s"] = round(max(self.resting_until - now, 0.0), 1)
        return state


class SolrNodes:
    """The nodes to try for each request, in turn, the resting ones last."""

    def __init__(
        self,
        urls: Sequence[str],
        *,
        discover: bool = True,
        zk_hosts: str = "",
        zk_digest: str = "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not urls:
            raise ValueError("SolrNodes needs at least one URL")
        self._clock = clock
        self._nodes = {url: NodeState(url, configured=True) for url in map(_normal, urls)}
        self._turn = 0
        self.discover = discover or bool(zk_hosts)
        self.zk_hosts = zk_hosts  # where the live nodes are read, if named
        self.zk_digest = zk_digest  # user:password of ZooKeeper's digest ACLs, if any
        self._refresh_at = 0.0  # learn the cluster's nodes at the first request
        self._refreshing = False
        # the nodes' own addresses are reachable: solr.url names nodes of the cluster (learned
        # at a refresh), or the operator named ZooKeeper, whose node names are those addresses
        self._direct = bool(zk_hosts)

    @classmethod
    def configured(cls, layout: SolrSettings) -> SolrNodes:
        """The nodes solr.url, solr.nodes.discover and solr.zk.hosts describe."""
        return cls.parse(
            layout.url,
            discover=layout.discover_nodes,
            zk_hosts=layout.zk_hosts,
            zk_digest=layout.zk_digest,
        )

    @classmethod
    def parse(
        cls, text: str, *, discover: bool = True, zk_hosts: str = "", zk_digest: str = ""
    ) -> SolrNodes:
        """From solr.url's text: one base URL, or several separated by commas."""
        urls = [url for url in (part.strip() for part in text.split(",")) if url]
        return cls(urls, discover=discover, zk_hosts=zk_hosts, zk_digest=zk_digest)

    @property
    def address(self) -> str:
        """solr.url's nodes, for messages to an operator."""
        return ", ".join(url for url, node in self._nodes.items() if node.configured)

    @property
    def scheme(self) -> str:
        return urlsplit(next(iter(self._nodes))).scheme

    def candidates(self) -> list[str]:
        """Every node, best first: those not resting, starting with the next in turn, then the
        resting ones, soonest back first (when all failed, a request still tries them)."""
        now = self._clock()
        ready = [node for node in self._nodes.values() if node.resting_until <= now]
        resting = sorted(
            (node for node in self._nodes.values() if node.resting_until > now),
            key=lambda node: node.resting_until,
        )
        if ready:
            start = self._turn % len(ready)
            self._turn += 1
            ready = ready[start:] + ready[:start]
        return [node.url for node in ready + resting]

    def succeeded(self, url: str) -> None:
        node = self._nodes.get(url)
        if node is None:
            return
        node.served += 1
        if node.failures:
            node.failures, node.resting_until, node.last_error = 0, 0.0, ""

    def failed(self, url: str, reason: str) -> None:
        node = self._nodes.get(url)
        if node is None:
            return
        node.failures += 1
        node.last_error = reason
        node.resting_until = self._clock() + RETRY_AFTER_SECONDS
        self._refresh_at = 0.0  # ask the cluster which nodes live, at the next request

    def claim_refresh(self) -> bool:
        """True when the caller should learn the live nodes now (one caller at a time)."""
        if not self.discover or self._refreshing or self._clock() < self._refresh_at:
            return False
        self._refreshing = True
        return True

    def refreshed(self, live: Iterable[str] | None, scheme: str | None = None) -> None:
        """The cluster's live node names (`host:port_solr`, reached by `scheme`: solr.url's
        when None), or None when none could be learned (a standalone Solr, no node answering):
        the configured nodes go on alone."""
        self._refreshing = False
        self._refresh_at = self._clock() + REFRESH_SECONDS
        if live is None:
            return
        urls = [_node_url(name, scheme or self.scheme) for name in live][:MAX_NODES]
        # once a live node is one of solr.url's, solr.url names the cluster's nodes (before:
        # it may be a proxy or load balancer in front of them, then used alone)
        self._direct = self._direct or any(
            node.configured and url in urls for url, node in self._nodes.items()
        )
        if not self._direct:
            return
        for url in urls:
            self._nodes.setdefault(url, NodeState(url, configured=False))
        for url in [url for url, node in self._nodes.items() if not node.configured]:
            if url not in urls:
                del self._nodes[url]  # left the cluster

    def report(self) -> list[dict[str, object]]:
        now = self._clock()
        return [node.report(now) for node in self._nodes.values()]

    def counts(self) -> tuple[int, int]:
        """(nodes up, nodes known)."""
        up = sum(1 for node in self._nodes.values() if node.failures == 0)
        return up, len(self._nodes)


def _normal(url: str) -> str:
    return url.rstrip("/")


def _node_url(name: str, scheme: str) -> str:
    """SolrCloud's node name `127.0.0.1:8983_solr` as a base URL `http://127.0.0.1:8983/solr`."""
    address, _, context = name.partition("_")
    return _normal(f"{scheme}://{address}/{context.replace('_', '/')}")
