"""The one mapping from httpx's failures to the service's upstream errors, for Solr, the LLM
and the embeddings API alike.

    >>> with upstream_call("Solr", timed_out="did not answer in time", unreachable="..."):
    ...     response = await http.get(url)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from service.errors import Overloaded, UpstreamTimeout, UpstreamUnavailable

# how long a request waits for a free connection of a shared pool: a full pool means the
# service is busy, not that the upstream failed, and says so quickly (Overloaded)
POOL_WAIT_SECONDS = 5.0


@contextmanager
def upstream_call(where: str, *, timed_out: str, unreachable: str) -> Iterator[None]:
    """httpx's failures inside the block, as UpstreamTimeout (`where timed_out`) or
    UpstreamUnavailable (`where unreachable (the failure's kind)`): no address, no token; a
    wait for a pooled connection past POOL_WAIT_SECONDS is Overloaded, no upstream failure."""
    try:
        yield
    except httpx.PoolTimeout:
        raise Overloaded(
            f"every connection to {where} is in use by other requests; retry shortly",
            retry_after=2,
        ) from None
    except httpx.TimeoutException:
        raise UpstreamTimeout(f"{where} {timed_out}") from None
    except httpx.TransportError as error:
        raise UpstreamUnavailable(f"{where} {unreachable} ({type(error).__name__})") from None
