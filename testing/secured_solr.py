"""What a secured Solr is made of, made here for tests: a CA of the test's own and the
certificates it signs (Solr's, a client's), Jetty's key and trust stores, Solr's security.json
(BasicAuthPlugin users, RuleBasedAuthorizationPlugin roles), and the system properties that put
SolrCloud's ZooKeeper data under digest ACLs. Nothing here talks to Solr: testing.solr starts
it with these (local_solr(security=, tls=, java_opts=)).
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from service.retrieval.solr_security import security_document

STORE_PASSWORD = "test-store-password"


@dataclass(frozen=True)
class Certificates:
    """PEM files (ca, client certificate and key, another CA's certificate, a key left
    unprotected) and `jetty`: the folder solr.sh --tls takes."""

    ca: Path
    client_cert: Path
    client_key: Path
    stranger_ca: Path  # a CA that signed nothing of this Solr's
    jetty: Path


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _signed(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None,
    *,
    ca: bool = False,
    server: bool = False,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    issuer_name, issuer_key = issuer or (_name(subject), key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        usage = x509.KeyUsage(False, False, False, False, False, True, True, False, False)
        builder = builder.add_extension(usage, critical=True)
    else:
        purposes = [ExtendedKeyUsageOID.CLIENT_AUTH]
        if server:
            purposes.append(ExtendedKeyUsageOID.SERVER_AUTH)
            names = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        builder = builder.add_extension(x509.ExtendedKeyUsage(purposes), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _pem(path: Path, certificate: x509.Certificate) -> Path:
    path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    return path


def _key_pem(path: Path, key: ec.EllipticCurvePrivateKey) -> Path:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    os.chmod(path, 0o600)
    return path


def make_certificates(folder: Path, *, client_auth: bool) -> Certificates:
    """A CA, Solr's certificate for 127.0.0.1 and a client's, both signed by it; Jetty's stores
    (keytool writes the trust store, as Java wants it); `client_auth`: Solr asks every client
    for a certificate the CA signed."""
    folder.mkdir(parents=True, exist_ok=True)
    jetty = folder / "jetty"
    jetty.mkdir(exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _signed("solr-rag test CA", ca_key, None, ca=True)
    issuer = (ca.subject, ca_key)
    solr_key = ec.generate_private_key(ec.SECP256R1())
    solr = _signed("127.0.0.1", solr_key, issuer, server=True)
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = _signed("solr-rag client", client_key, issuer)
    stranger_key = ec.generate_private_key(ec.SECP256R1())
    stranger = _signed("another CA", stranger_key, None, ca=True)

    ca_pem = _pem(folder / "ca.pem", ca)
    store = pkcs12.serialize_key_and_certificates(
        b"solr",
        solr_key,
        solr,
        [ca],
        serialization.BestAvailableEncryption(STORE_PASSWORD.encode()),
    )
    (jetty / "solr.p12").write_bytes(store)
    subprocess.run(
        [
            "keytool",
            "-importcert",
            "-noprompt",
            "-alias",
            "ca",
            "-file",
            str(ca_pem),
            "-keystore",
            str(jetty / "trust.p12"),
            "-storetype",
            "PKCS12",
            "-storepass",
            STORE_PASSWORD,
        ],
        check=True,
        capture_output=True,
    )
    (jetty / "password").write_text(STORE_PASSWORD)
    if client_auth:
        (jetty / "client-auth").write_text("")
    return Certificates(
        ca=ca_pem,
        client_cert=_pem(folder / "client.pem", client),
        client_key=_key_pem(folder / "client-key.pem", client_key),
        stranger_ca=_pem(folder / "stranger-ca.pem", stranger),
        jetty=jetty,
    )


def security_json(
    folder: Path, users: Mapping[str, tuple[str, Sequence[str]]], *, writers: Sequence[str]
) -> Path:
    """Solr's security.json as the service's own command writes it (retrieval.solr_security):
    BasicAuth for `users` (name -> password, roles), anonymous requests refused; every role of
    `users` may read, those in `writers` may also update."""
    readers = sorted({role for _, roles in users.values() for role in roles})
    document = security_document(users, readers=readers, writers=writers)
    path = folder / "security.json"
    path.write_text(json.dumps(document, indent=2))
    return path


def zookeeper_acl_options(admin_password: str, reader: str, reader_password: str) -> str:
    """SOLR_JAVA_OPTS that put SolrCloud's ZooKeeper data under digest ACLs (Solr's own
    providers): an admin that may do all, and `reader` that may only read."""
    return " ".join(
        [
            "-Xms256m -Xmx1g",
            "-DzkACLProvider=org.apache.solr.common.cloud.DigestZkACLProvider",
            "-DzkCredentialsProvider=org.apache.solr.common.cloud.DigestZkCredentialsProvider",
            "-DzkCredentialsInjector=org.apache.solr.common.cloud.VMParamsZkCredentialsInjector",
            "-DzkDigestUsername=zk-admin",
            f"-DzkDigestPassword={admin_password}",
            f"-DzkDigestReadonlyUsername={reader}",
            f"-DzkDigestReadonlyPassword={reader_password}",
        ]
    )
