"""Who is calling (service.api.identity) and from which page (service.api.door), as the door
decides them for every way in: issue 66's review findings, each as it was found."""

from __future__ import annotations

import hashlib
import time

import jwt
import pytest
from starlette.requests import HTTPConnection

from service.api.door import Door, _origin, _same_host
from service.api.identity import identify
from service.config.settings import Settings
from service.config.store import settings_from_mapping
from service.errors import Forbidden, Unauthorized
from service.retrieval.scope import LEVELS, NO_SECURITY, PUBLIC, visible_to

SECRET = "identity-unit-" + "k" * 40
KEY = "the-shared-key"


def settings(**values: object) -> Settings:
    given = {"api.keys": KEY, **values}
    return settings_from_mapping({k: str(v).lower() if isinstance(v, bool) else str(v)
                                  for k, v in given.items()}, source="test", env={})  # fmt: skip


JWT = {"security.identity": "jwt", "security.jwt.key": SECRET, "security.jwt.algorithms": "HS256"}


def connection(**headers: str) -> HTTPConnection:
    raw = [(name.replace("_", "-").lower().encode(), value.encode("latin-1"))
           for name, value in headers.items()]  # fmt: skip
    scope = {"type": "http", "method": "GET", "path": "/ai", "headers": raw,
             "client": ("10.1.2.3", 5000), "query_string": b""}  # fmt: skip
    return HTTPConnection(scope)


def bearer(**claims: object) -> str:
    return "Bearer " + jwt.encode({"exp": int(time.time()) + 600, **claims}, SECRET, "HS256")


@pytest.mark.parametrize("enabled", [True, False])
def test_the_person_is_known_with_or_without_document_security(enabled: bool) -> None:
    """Finding: with security.enabled=false, everyone behind one key shared one owner."""
    config = settings(**JWT, **{"security.enabled": enabled})
    a = identify(connection(x_api_key=KEY, authorization=bearer(sub="alice")), config)
    b = identify(connection(x_api_key=KEY, authorization=bearer(sub="bob")), config)
    assert a.owner and b.owner and a.owner != b.owner
    header = settings(**{"security.user.header": "X-User", "security.enabled": enabled})
    c = identify(connection(x_api_key=KEY, x_user="carol"), header)
    d = identify(connection(x_api_key=KEY, x_user="dave"), header)
    assert c.owner != d.owner and c.person == "user:carol"


def test_two_long_subjects_sharing_a_head_are_two_people() -> None:
    head = "https://idp.example/tenant/" + "x" * 300
    config = settings(**JWT)
    a = identify(connection(x_api_key=KEY, authorization=bearer(sub=head + "alice")), config)
    b = identify(connection(x_api_key=KEY, authorization=bearer(sub=head + "bob")), config)
    assert a.owner != b.owner and a.name != b.name


def test_a_token_naming_nobody_owns_nothing_and_is_not_the_key() -> None:
    config = settings(**JWT, **{"security.identity.required": False})
    nameless = identify(connection(x_api_key=KEY, authorization=bearer(groups=[])), config)
    assert nameless.owner is None
    key_only = identify(connection(x_api_key=KEY), config)
    assert key_only.owner is not None and key_only.person is None


def test_an_expiry_written_as_digits_is_read() -> None:
    ends = int(time.time()) + 60
    config = settings(**JWT)
    caller = identify(connection(x_api_key=KEY, authorization=bearer(sub="s", exp=str(ends))),
                      config)  # fmt: skip
    assert caller.expires == ends


def test_the_api_key_in_authorization_is_no_identity_token() -> None:
    config = settings(**JWT, **{"security.enabled": True, "security.identity.required": False})
    caller = identify(connection(authorization=f"Bearer {KEY}"), config)
    assert caller.key and caller.person is None and caller.scope.groups == ()
    assert caller.scope.groups_unknown  # no identity sent: its groups are not "none"
    with pytest.raises(Unauthorized, match=r"security\.identity\.required"):
        identify(connection(authorization=f"Bearer {KEY}"), settings(**JWT))
    with pytest.raises(Unauthorized):
        identify(connection(x_api_key=KEY, authorization="Bearer not-a-token"), config)


@pytest.mark.parametrize(
    ("origin", "host", "same"),
    [
        ("http://testserver", "testserver", True),
        ("http://testserver", "testserver:80", True),  # finding: the default port on one side
        ("https://search.example.org", "search.example.org", True),
        ("http://127.0.0.1:8000", "127.0.0.1:8000", True),
        ("http://[::1]:8000", "[::1]:8000", True),
        ("http://testserver:8080", "testserver", True),  # a Host without its port (nginx)
        ("https://search.example.org:8443", "search.example.org", True),
        ("http://testserver:8080", "testserver:8081", False),
        ("http://testserver", "evil.example", False),
        ("http://evil.example", "testserver", False),
        ("http://testserver", "testserver@evil.example", False),
        ("http://testserver", "testserver/path", False),
    ],
)
def test_the_page_s_own_origin(origin: str, host: str, same: bool) -> None:
    assert _same_host(_origin(origin), host) is same


def test_a_proxy_s_forwarded_host_is_the_page_s_own_and_others_are_refused() -> None:
    door = Door(lambda: settings())
    config = settings(**{"cors.allowed.origins": "https://widget.example"})
    proxied = connection(origin="https://search.example.org", host="127.0.0.1:8000",
                         x_forwarded_host="search.example.org")  # fmt: skip
    door.check_origin(proxied, config)
    door.check_origin(connection(origin="https://widget.example", host="x"), config)
    door.check_origin(connection(host="x"), config)  # no Origin: not a browser
    for hostile in ("https://evil.example", "null", "https://widget.example.evil"):
        with pytest.raises(Forbidden):
            door.check_origin(connection(origin=hostile, host="127.0.0.1:8000"), config)


@pytest.mark.parametrize("enabled", [True, False])
def test_an_identity_source_requires_its_identity_by_default(enabled: bool) -> None:
    """Issue 81, finding 1: with an identity source configured, the key alone was anonymous,
    and an anonymous caller saw what its person's group is denied."""
    for source, person in ((JWT, {"authorization": bearer(sub="bob", groups=["eng"])}),
                           ({"security.user.header": "X-User"}, {"x_user": "bob"})):  # fmt: skip
        config = settings(**source, **{"security.enabled": enabled})
        with pytest.raises(Unauthorized, match=r"security\.identity\.required"):
            identify(connection(x_api_key=KEY), config)
        known = identify(connection(x_api_key=KEY, **person), config)
        assert known.person and not known.scope.groups_unknown
        allowed = settings(**source, **{"security.enabled": enabled,
                                        "security.identity.required": False})  # fmt: skip
        unknown = identify(connection(x_api_key=KEY), allowed)
        assert unknown.person is None and unknown.scope.groups_unknown is enabled
    # no identity source (the groups header of a trusted proxy): the key alone is answered
    plain = identify(connection(x_api_key=KEY), settings(**{"security.enabled": True}))
    assert plain.scope.groups == () and not plain.scope.groups_unknown


def test_a_caller_of_unknown_groups_sees_no_document_that_denies_any() -> None:
    unknown = visible_to((), "groups", unknown=True)
    assert "*:* -denied_groups:[* TO *]" in unknown
    assert visible_to((), "groups") == [PUBLIC]
    tokens = visible_to((), "manifoldcf", unknown=True)
    for level in LEVELS:  # any deny token but ManifoldCF's "open" one hides the document
        assert any(f"deny_token_{level}:[* TO" in f and NO_SECURITY in f for f in tokens), tokens


def test_a_subject_that_spells_a_long_subject_s_hash_is_another_person() -> None:
    """Issue 81, finding 5: a sub over 200 characters was kept as "#" + its sha256, so a
    token whose sub was that very text was the same owner."""
    config = settings(**JWT)
    long = "https://idp.example/tenant/" + "y" * 300
    real = identify(connection(x_api_key=KEY, authorization=bearer(sub=long)), config)
    spelled = "#" + hashlib.sha256(long.encode()).hexdigest()
    forged = identify(connection(x_api_key=KEY, authorization=bearer(sub=spelled)), config)
    assert real.owner != forged.owner and real.name != forged.name
    # nor is a subject ever the key's owner, or a proxy's user
    key_owner = identify(connection(x_api_key=KEY), settings(**JWT, **{
        "security.identity.required": False})).owner  # fmt: skip
    header = settings(**{"security.user.header": "X-User"})
    carol = identify(connection(x_api_key=KEY, x_user="carol"), header).owner
    for owner in (key_owner, carol):
        assert owner is not None
        who = owner.rpartition("|")[0]
        for subject in (who, owner, "sub:" + who, "#" + who):
            caller = identify(connection(x_api_key=KEY, authorization=bearer(sub=subject)),
                              config)  # fmt: skip
            assert caller.owner != owner
    # a subject of the same text as a short one keeps its key (stored conversations stay)
    short = identify(connection(x_api_key=KEY, authorization=bearer(sub="alice")), config)
    assert short.person == "sub:alice"
