"""The one mapping from httpx's failures to the service's upstream errors, for Solr, the LLM
and the embeddings API alike.

    >>> with upstream_call("Solr", timed_out="did not answer in time", unreachable="..."):
    ...     response = await http.get(url)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from service.errors import UpstreamTimeout, UpstreamUnavailable


@contextmanager
def upstream_call(where: str, *, timed_out: str, unreachable: str) -> Iterator[None]:
    """httpx's failures inside the block, as UpstreamTimeout (`where timed_out`) or
    UpstreamUnavailable (`where unreachable (the failure's kind)`): no address, no token."""
    try:
        yield
    except httpx.TimeoutException:
        raise UpstreamTimeout(f"{where} {timed_out}") from None
    except httpx.TransportError as error:
        raise UpstreamUnavailable(f"{where} {unreachable} ({type(error).__name__})") from None
