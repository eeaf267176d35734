"""Can each upstream be reached now? What /health/ready and the admin page show.

>>> probe = await probe_upstreams(runtime, settings)
>>> probe.checks["llm"]          # {"status": "up"} or {"status": "down", "reason": ...}
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass

from service.config import Settings
from service.errors import ServiceError
from service.runtime import Runtime

PROBE_TIMEOUT_SECONDS = 5.0


@dataclass(frozen=True)
class Probe:
    """Each upstream's state (`{"status": "up"}`, or `down` with the reason) and the models
    the LLM lists."""

    checks: dict[str, dict[str, str]]
    llm_models: list[str]


def addresses(settings: Settings) -> dict[str, str]:
    """Where each upstream a probe names is: told to the admin only."""
    found = {
        "llm": settings.llm.endpoint,
        "embeddings": settings.embeddings.endpoint,
        f"solr:{settings.solr.documents_collection}": settings.solr.url,
        f"solr:{settings.solr.passages_collection}": settings.solr.url,
    }
    if settings.cache.enabled:
        found[f"solr:{settings.solr.cache_collection}"] = settings.solr.url
    return found


async def probe_upstreams(
    runtime: Runtime, settings: Settings, *, embeddings: bool = True
) -> Probe:
    """The LLM and the embeddings API list their models, each Solr collection answers a ping;
    each within PROBE_TIMEOUT_SECONDS. Reasons name upstreams, never their addresses."""
    solr = runtime.solr(settings)
    llm = runtime.llm(settings)
    models: list[str] = []

    async def llm_models() -> None:
        models.extend(await llm.list_models())

    layout = settings.solr
    checks = {
        "llm": llm_models(),
        f"solr:{layout.documents_collection}": solr.ping(layout.documents_collection),
        f"solr:{layout.passages_collection}": solr.ping(layout.passages_collection),
    }
    if settings.cache.enabled:
        checks[f"solr:{layout.cache_collection}"] = solr.ping(layout.cache_collection)
    if embeddings:
        checks["embeddings"] = runtime.embeddings(settings).list_models()
    results = await asyncio.gather(*(_probed(check) for check in checks.values()))
    return Probe(dict(zip(checks, results, strict=True)), models)


async def _probed(call: Awaitable[object]) -> dict[str, str]:
    try:
        async with asyncio.timeout(PROBE_TIMEOUT_SECONDS):
            await call
    except ServiceError as error:
        return {"status": "down", "reason": error.reason}
    except TimeoutError:
        return {"status": "down", "reason": f"no answer within {PROBE_TIMEOUT_SECONDS:g}s"}
    return {"status": "up"}
