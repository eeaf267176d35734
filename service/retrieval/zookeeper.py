"""The live Solr nodes as ZooKeeper knows them (solr.zk.hosts).

SolrCloud's own source of truth: each live node holds an ephemeral entry under /live_nodes.
Asking ZooKeeper needs no Solr node, so the service finds the cluster even when every node
solr.url names is gone. Read with kazoo (synchronous, its own threads), once per refresh: a
session opened, two reads, closed.
"""

from __future__ import annotations

import json
import logging

from kazoo.client import KazooClient
from kazoo.exceptions import AuthFailedError, KazooException, NoAuthError
from kazoo.handlers.threading import KazooTimeoutError

log = logging.getLogger(__name__)

LIVE_NODES = "/live_nodes"
CLUSTER_PROPERTIES = "/clusterprops.json"


class ZooKeeperUnavailable(Exception):
    """ZooKeeper could not be asked, or answered something unusable; the reason says which."""


def live_nodes(hosts: str, timeout: float, digest: str = "") -> tuple[list[str], str]:
    """The live nodes' names (`host:port_solr`) and the cluster's URL scheme (`urlScheme` of
    its properties: http unless set), from ZooKeeper at `hosts` (`zk1:2181,zk2:2181/chroot`)
    within about `timeout` seconds; `digest`: `user:password` for a ZooKeeper whose data is
    under digest ACLs (solr.zk.digest.*). Blocking: call it in a thread."""
    auth = [("digest", digest)] if digest else None
    client = KazooClient(hosts=hosts, timeout=timeout, read_only=True, auth_data=auth)
    try:
        client.start(timeout=timeout)
        names = [str(name) for name in client.get_children(LIVE_NODES)]
        scheme = "http"
        if client.exists(CLUSTER_PROPERTIES):
            data, _ = client.get(CLUSTER_PROPERTIES)
            properties = json.loads(data or b"{}")
            if isinstance(properties, dict) and properties.get("urlScheme") in ("http", "https"):
                scheme = properties["urlScheme"]
        return names, scheme
    except KazooTimeoutError:
        raise ZooKeeperUnavailable(f"no ZooKeeper answered within {timeout:g}s") from None
    except NoAuthError:
        hint = "check" if digest else "set"
        raise ZooKeeperUnavailable(
            f"ZooKeeper's ACLs refuse to show the live nodes: {hint} solr.zk.digest.user and "
            "SOLR_RAG_SOLR_ZK_DIGEST_PASSWORD"
        ) from None
    except AuthFailedError:
        raise ZooKeeperUnavailable(
            "ZooKeeper refused the digest credentials: check solr.zk.digest.user and "
            "SOLR_RAG_SOLR_ZK_DIGEST_PASSWORD"
        ) from None
    except (KazooException, ValueError) as error:
        raise ZooKeeperUnavailable(f"ZooKeeper: {type(error).__name__} {error}"[:300]) from None
    finally:
        client.stop()
        client.close()
