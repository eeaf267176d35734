"""The admin API: read and change rag.properties, and test the connections it describes.

    GET   /admin/config            every key: value (tokens masked), type, default, limits, help
    PATCH /admin/config            {"key": value, ...}; `If-Match: <version>` guards against
                                   overwriting an edit made meanwhile (409); PUT is the same
    POST  /admin/test-connection   can the LLM, the embeddings API and Solr be reached?
    DELETE /admin/cache            empties the answer cache (cache.enabled)

All need `Authorization: Bearer <admin token>`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Header, Request, Response
from pydantic import BaseModel, Field

from service.api.auth import require_admin
from service.api.dependencies import CurrentSnapshot
from service.api.errors import documented_errors
from service.api.payload import json_route
from service.config import Settings
from service.config.catalog import by_key, catalog
from service.config.settings import secret_destinations
from service.config.store import ConfigStore, env_name
from service.errors import (
    ConfigChangedMeanwhile,
    ConfigConflict,
    ConfigError,
    FeatureDisabled,
    InvalidConfigChange,
)
from service.probes import addresses, probe_upstreams
from service.runtime import Runtime
from service.text.tokens import TokenizerError, loaded_counter

router = APIRouter(tags=["admin"], dependencies=[Depends(require_admin)], route_class=json_route())


class KeyOut(BaseModel):
    """One rag.properties key as the admin API shows it."""

    key: str
    value: Any = Field(description="The value in force; a token shows only `***` when set.")
    type: str = Field(description="boolean, integer, number, string, choice or secret.")
    default: Any
    description: str
    choices: list[str] = []
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    read_only: bool = False
    optional: bool = Field(False, description="Blank (null) is a value: the key unset.")
    environment: str | None = Field(
        None, description="The environment variable that sets this key instead of the file."
    )


class ConfigOut(BaseModel):
    """Every key, with the version of the file they were read from."""

    version: str = Field(description="Send it back as If-Match to refuse overwriting others.")
    path: str
    settings: list[KeyOut]


def _config_out(runtime: Runtime, settings: Settings, version: str) -> ConfigOut:
    store = runtime.config
    return ConfigOut(
        version=version,
        path=str(store.path),
        settings=[
            KeyOut(
                key=info.key,
                value=info.shown(settings),
                type=info.kind,
                default=info.default,
                description=info.description,
                choices=list(info.choices),
                minimum=info.minimum,
                maximum=info.maximum,
                exclusive_minimum=info.exclusive_minimum,
                read_only=info.read_only,
                optional=info.optional,
                environment=store.overridden_by_env(info.key),
            )
            for info in catalog()
        ],
    )


@router.get("/admin/config", response_model=ConfigOut, responses=documented_errors(403))
def read_config(request: Request, response: Response) -> ConfigOut:
    runtime: Runtime = request.app.state.runtime
    version = runtime.config.version()
    response.headers["ETag"] = f'"{version}"'
    return _config_out(runtime, runtime.settings(), version)


@router.put("/admin/config", response_model=ConfigOut, responses=documented_errors(403, 409, 422))
@router.patch("/admin/config", response_model=ConfigOut, responses=documented_errors(403, 409, 422))
async def change_config(
    request: Request,
    response: Response,
    changes: Annotated[
        dict[str, bool | int | float | str | None],
        Body(examples=[{"llm.model": "gpt-4o-mini", "llm.temperature": 0.2}]),
    ],
    if_match: Annotated[
        str | None, Header(description="The version the change is based on.")
    ] = None,
) -> ConfigOut:
    """Validates the changes against the typed configuration, and checks that the service
    could still start with them (prompt templates load; Solr has the collections and fields a
    changed Solr key points at); then writes rag.properties atomically (comments, key order
    and unknown keys kept); the next request uses them. `null` puts a key back to its
    default. Changing an endpoint needs its token again (or `null`): a stored token is never
    sent to a new address."""
    runtime: Runtime = request.app.state.runtime
    if not changes:
        raise InvalidConfigChange("the body names no key to change")
    written = _as_properties(changes)
    expected = if_match.strip().removeprefix("W/").strip('"') if if_match else None
    expected = None if expected == "*" else expected
    try:
        if written:
            # validated off the event loop: a tokenizer file (llm.tokenizer) is read there
            preview = await asyncio.to_thread(runtime.config.preview, written)
            # the settings in force read now, never under the file's lock (a reload there
            # would wait on the lock its own thread holds)
            keep = partial(
                _keep_tokens_with_their_endpoints, runtime.config, runtime.settings(), written
            )
            keep(await asyncio.to_thread(runtime.config.as_is), preview)  # before Solr is asked
            await runtime.check_startable(preview, set(written))
            # the file lock may wait: off the event loop; checked again under the lock, on
            # the file as it is then (an edit meanwhile)
            settings, version = await asyncio.to_thread(
                runtime.config.update, written, expected_version=expected, check=keep
            )
            # an OpenAI model's encoding loaded now, off the loop, not by the next question
            with contextlib.suppress(TokenizerError):  # a file gone meanwhile: said when used
                await loaded_counter(settings.llm.tokenizer, settings.llm.model)
        else:
            settings, version = runtime.settings(), runtime.config.version()
    except ConfigConflict as error:
        raise ConfigChangedMeanwhile(str(error)) from None
    except ConfigError as error:
        raise InvalidConfigChange(str(error)) from None
    response.headers["ETag"] = f'"{version}"'
    return _config_out(runtime, settings, version)


def _as_properties(changes: dict[str, Any]) -> dict[str, str | None]:
    """The changes as rag.properties text (None: back to the default); a masked token sent
    back unchanged is no change."""
    keys = by_key()
    written: dict[str, str | None] = {}
    for key, value in changes.items():
        info = keys.get(key)
        if info is None:
            raise InvalidConfigChange(f"{key}: unknown key")
        if info.read_only:
            raise InvalidConfigChange(
                f"{key}: read-only through the admin API: set it on the server, in "
                f"rag.properties or the environment variable {env_name(key)}"
            )
        if info.kind == "secret" and value == "***":
            continue  # the masked value sent back unchanged: keep the token
        try:
            written[key] = info.as_property(value)
        except ValueError as error:
            raise InvalidConfigChange(f"{key}: {error}") from None
    return written


def _keep_tokens_with_their_endpoints(
    store: ConfigStore,
    in_force: Settings,
    written: Mapping[str, str | None],
    as_is: Settings | None,
    changed: Settings,
) -> None:
    """A change that sends a token to an address it did not go to (any key that decides it:
    an endpoint, or for Solr's login solr.url, solr.zk.hosts and solr.nodes.discover) would
    let an admin session exfiltrate it: the same change must give the token again (or null).
    A token is given only when the change names its key: compared by value, a token rotated
    in its file since the settings in force were read would pass for given. An address is
    new when the settings in force or the file as it is (`as_is`: a reload may have failed)
    do not send the token there; with the file not valid now (`as_is` None), every address
    the change writes is new. Fewer addresses (a node left out of solr.url, discovery off)
    are no new one. A token the environment sets cannot be given here: its addresses are
    changed where it is set."""
    for token_key, endpoint_keys in secret_destinations().items():
        if not endpoint_keys or token_key in written:
            continue
        if not changed.value(token_key).get_secret_value():
            continue  # no token goes anywhere
        moved = [
            key
            for key in endpoint_keys
            if key in written
            and (
                as_is is None
                or any(_widens(key, changed.value(key), s.value(key)) for s in (in_force, as_is))
            )
        ]
        if not moved:
            continue
        them = "it" if len(moved) == 1 else "them"
        variable = store.overridden_by_env(token_key)
        if variable:
            raise InvalidConfigChange(
                f"{', '.join(moved)}: would send {token_key}, which the environment variable "
                f"{variable} sets, to a new address: change {them} in the environment (the "
                "admin API never sends a token it cannot be given to an address it sets)"
            )
        raise InvalidConfigChange(
            f"{', '.join(moved)}: changing {them} needs {token_key} again in the same "
            f"change (or {token_key}: null to clear it): the stored token is never sent to "
            "a new address"
        )


def _widens(key: str, value: object, before: object) -> bool:
    """Whether a key deciding where a token goes names an address `before` did not: a URL,
    one of a list's (solr.url, solr.zk.hosts), discovery turned on, or another ZooKeeper
    chroot (it moves where every host of the list is read: a node list elsewhere)."""
    if isinstance(value, bool):
        return value and not before
    if key == "solr.zk.hosts":  # the hosts, then where on them
        hosts, chroot = _zookeeper(value)
        hosts_before, chroot_before = _zookeeper(before)
        return bool(hosts - hosts_before) or chroot != chroot_before
    return bool(_addresses(value) - _addresses(before))


def _zookeeper(value: object) -> tuple[frozenset[str], str]:
    """A ZooKeeper host list's hosts and chroot ("zk1:2181,zk2:2181/solr": /solr)."""
    text = "" if value is None else str(value)
    at = text.find("/")
    hosts, chroot = (text[:at], text[at:].rstrip("/")) if at >= 0 else (text, "")
    return _addresses(hosts), chroot


def _addresses(value: object) -> frozenset[str]:
    """The addresses a value names, compared as written less a trailing slash."""
    if value is None:
        return frozenset()
    return frozenset(part.strip().rstrip("/") for part in str(value).split(",") if part.strip())


@router.post("/admin/test-connection", responses=documented_errors(403))
async def test_connection(request: Request) -> dict[str, dict[str, str]]:
    """Reaches each service the saved configuration names: the LLM (its model list, and
    whether llm.model is in it), the embeddings API, and both Solr collections; the admin is
    told where each one is (anonymous reasons never hold addresses)."""
    runtime: Runtime = request.app.state.runtime
    settings = runtime.settings()
    probe = await probe_upstreams(runtime, settings)
    report = probe.checks
    for name, address in addresses(settings).items():
        report[name]["at"] = address
    models = probe.llm_models
    if report["llm"]["status"] == "up" and settings.llm.model and models:
        listed = settings.llm.model in models
        report["llm"]["model"] = (
            f"{settings.llm.model} is served"
            if listed
            else f"{settings.llm.model} is not in the server's list ({', '.join(models[:5])})"
        )
    return report


class CacheCleared(BaseModel):
    status: str = "OK"
    deleted: int = Field(description="Cached answers removed.")


@router.delete("/admin/cache", response_model=CacheCleared, responses=documented_errors(403))
async def clear_cache(snapshot: CurrentSnapshot) -> CacheCleared:
    """Empties the answer cache: every later question is answered anew (then cached again)."""
    cache = snapshot.answer_cache
    if cache is None:
        raise FeatureDisabled("the answer cache is off: cache.enabled=false in rag.properties")
    return CacheCleared(deleted=await cache.clear())
