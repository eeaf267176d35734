"""A secured Solr's keys (solr.auth.*, solr.tls.*, solr.zk.digest.*): what rag.properties
refuses at load, with the key named and the secret never echoed, and what the service sends."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

import pytest

from service.config import settings_from_mapping
from service.config.settings import secret_destinations
from service.errors import ConfigError
from service.retrieval.access import SolrAccess, SolrPools
from service.retrieval.solr import SolrClient
from testing.secured_solr import Certificates, make_certificates

SECRET = "s3cret-pa55"


def load(**values: str) -> object:
    return settings_from_mapping(
        {key.replace("_", "."): value for key, value in values.items()}, source="t", env={}
    )


def refused(values: dict[str, str], key: str) -> str:
    with pytest.raises(ConfigError) as raised:
        settings_from_mapping(values, source="rag.properties", env={})
    message = str(raised.value)
    assert key in message
    assert SECRET not in message
    return message


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("ca"), client_auth=True)


@pytest.mark.parametrize(
    "smuggled", [f"{SECRET}\r\nX-Admin: yes", f"pa\n{SECRET}", f"{SECRET}\x00", f"{SECRET}\x7f"]
)
@pytest.mark.parametrize("key", ["solr.auth.password", "solr.auth.token"])
def test_a_secret_with_a_line_break_or_control_character_is_refused(
    key: str, smuggled: str
) -> None:
    values = {key: smuggled}
    if key == "solr.auth.password":
        values["solr.auth.user"] = "rag"
    message = refused(values, key)
    assert "X-Admin" not in message


def test_a_user_name_with_a_colon_or_a_line_break_is_refused() -> None:
    for user in ("rag:admin", "rag\r\nX-Admin: yes"):
        refused({"solr.auth.user": user, "solr.auth.password": SECRET}, "solr.auth.user")
    refused(
        {"solr.zk.hosts": "zk:2181", "solr.zk.digest.user": "a:b", "solr.zk.digest.password": "x"},
        "solr.zk.digest.user",
    )


def test_a_password_in_solr_url_is_refused_and_never_echoed() -> None:
    message = refused({"solr.url": f"https://rag:{SECRET}@solr.example:8983/solr"}, "solr.url")
    assert "solr.auth.user" in message and "SOLR_RAG_SOLR_AUTH_PASSWORD" in message


def test_logins_that_do_not_fit_together_are_refused() -> None:
    refused({"solr.auth.user": "rag"}, "solr.auth.password")
    refused({"solr.auth.password": SECRET}, "solr.auth.user")
    refused(
        {"solr.auth.user": "rag", "solr.auth.password": SECRET, "solr.auth.token": "t"},
        "solr.auth.token",
    )
    refused({"solr.zk.digest.user": "reader", "solr.zk.digest.password": "x"}, "solr.zk.hosts")


def test_tls_files_are_checked_at_load(tmp_path: Path, certificates: Certificates) -> None:
    not_a_certificate = tmp_path / "ca.pem"
    not_a_certificate.write_text("-----BEGIN CERTIFICATE-----\nnot base64\n")
    refused({"solr.tls.ca": str(not_a_certificate)}, "solr.tls.ca")
    refused({"solr.tls.ca": str(tmp_path / "missing.pem")}, "solr.tls.ca")
    refused({"solr.tls.key": str(certificates.client_key)}, "solr.tls.key")  # no certificate
    refused(  # a certificate whose key this is not
        {
            "solr.tls.cert": str(certificates.stranger_ca),
            "solr.tls.key": str(certificates.client_key),
        },
        "solr.tls.cert",
    )
    settings = settings_from_mapping(
        {
            "solr.tls.ca": str(certificates.ca),
            "solr.tls.cert": str(certificates.client_cert),
            "solr.tls.key": str(certificates.client_key),
        },
        source="t",
        env={},
    )
    assert SolrAccess.of(settings.solr).verify is not True  # the CA's own context


def test_the_login_goes_in_one_header_and_refusals_name_the_key() -> None:
    settings = settings_from_mapping(
        {"solr.auth.user": "rag", "solr.auth.password": SECRET}, source="t", env={}
    )
    access = SolrAccess.of(settings.solr)
    ((name, value),) = access.headers
    assert name == "Authorization"
    assert base64.b64decode(value.removeprefix("Basic ")).decode() == f"rag:{SECRET}"
    for status, path in (
        (401, "/FileShare/select"),
        (403, "/FileShare/select"),
        (403, "/x/update"),
    ):
        said = access.refusal(status, "POST", path)
        assert SECRET not in said and "rag" not in said.split("(")[0].split()
    assert "SOLR_RAG_SOLR_AUTH_PASSWORD" in access.refusal(401, "POST", "/FileShare/select")
    assert "update permission" in access.refusal(403, "POST", "/FileShare/update")
    anonymous = SolrAccess.of(settings_from_mapping({}, source="t", env={}).solr)
    assert anonymous.headers == ()
    assert "solr.auth.user" in anonymous.refusal(401, "GET", "/FileShare/select")
    token = settings_from_mapping({"solr.auth.token": "abc.def"}, source="t", env={})
    assert SolrAccess.of(token.solr).headers == (("Authorization", "Bearer abc.def"),)


def test_a_client_of_a_layout_has_its_login_and_the_pool_of_its_tls(
    certificates: Certificates,
) -> None:
    """SolrClient.of pairs a layout's TLS (its pool) and login (its headers): a command's
    SolrPools open one pool a TLS and close them all when it is done."""
    plain = settings_from_mapping(
        {"solr.url": "http://a:8983/solr,http://b:8983/solr", "solr.timeout.read": "7"},
        source="t",
        env={},
    ).solr
    secured = settings_from_mapping(
        {
            "solr.url": "https://a:8983/solr",
            "solr.auth.token": "abc.def",
            "solr.tls.ca": str(certificates.ca),
        },
        source="t",
        env={},
    ).solr

    async def opened() -> list[SolrClient]:
        async with SolrPools() as pools:
            clients = [SolrClient.of(layout, pools) for layout in (plain, plain, secured)]
            assert pools("solr") is clients[0]._http is clients[1]._http
            assert clients[2]._http is pools(SolrAccess.of(secured).pool_name())
            assert clients[2]._http is not clients[0]._http
        return clients

    one, _, tls = asyncio.run(opened())
    assert one.nodes.address == "http://a:8983/solr, http://b:8983/solr"
    assert one._timeout.read == 7 and one._access.headers == ()
    assert tls._access.headers == (("Authorization", "Bearer abc.def"),)
    assert one._http.is_closed and tls._http.is_closed


def test_solr_secrets_are_sent_only_to_their_endpoint() -> None:
    """Solr's login goes to the nodes solr.url names, to those its cluster names
    (solr.nodes.discover) and to those solr.zk.hosts' ZooKeeper names: each key decides where
    it goes (issue 66); ZooKeeper's digest goes to solr.zk.hosts only."""
    sent_to = secret_destinations()
    nodes = {"solr.url", "solr.zk.hosts", "solr.nodes.discover"}
    assert set(sent_to["solr.auth.password"]) == nodes
    assert set(sent_to["solr.auth.token"]) == nodes
    assert sent_to["solr.zk.digest.password"] == ("solr.zk.hosts",)
    assert sent_to["solr.tls.key.password"] == ()  # it unlocks the key here, never leaves


def test_secrets_come_from_the_environment() -> None:
    settings = settings_from_mapping(
        {"solr.auth.user": "rag"}, source="t", env={"SOLR_RAG_SOLR_AUTH_PASSWORD": SECRET}
    )
    assert settings.solr.auth_password.get_secret_value() == SECRET
    assert SECRET not in repr(settings)
