"""solr.tls.* as values: the files that make the TLS of the service's connections to Solr,
checked when rag.properties loads (a file that is not what its key says is a config error
naming the key), read again when a file changes on disk. A layout's files: `SolrSettings.tls`;
the connections made with them: service.retrieval.access.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass, field
from functools import lru_cache


@dataclass(frozen=True)
class TlsFiles:
    """solr.tls.* as files and what each file was when read (size, modification time), so a
    certificate replaced on disk is read again."""

    ca: str = ""
    cert: str = ""
    key: str = ""
    key_password: str = field(default="", repr=False)
    stamps: tuple[tuple[int, int], ...] = ()

    @classmethod
    def read(cls, ca: str, cert: str, key: str, key_password: str) -> TlsFiles:
        """The files as they are on disk now."""
        paths = (ca, cert, key)
        return cls(*paths, key_password=key_password, stamps=tuple(_stamp(p) for p in paths))

    @property
    def any(self) -> bool:
        return bool(self.ca or self.cert)


def _stamp(path: str) -> tuple[int, int]:
    try:
        found = os.stat(path) if path else None
    except OSError:
        return (-1, -1)
    return (found.st_size, found.st_mtime_ns) if found else (0, 0)


@lru_cache(maxsize=16)
def tls_context(files: TlsFiles) -> ssl.SSLContext | None:
    """The TLS context solr.tls.* describe, None when they say nothing (the usual CAs); raises
    ValueError naming the key and what is wrong with its file."""
    if not files.any:
        return None
    try:
        context = ssl.create_default_context(cafile=files.ca or None)
    except FileNotFoundError:
        raise ValueError(f"solr.tls.ca: no file {files.ca!r}") from None
    except (ssl.SSLError, OSError, ValueError):
        raise ValueError(f"solr.tls.ca: {files.ca!r} holds no PEM certificate") from None
    if files.cert:
        for key, path in (("solr.tls.cert", files.cert), ("solr.tls.key", files.key)):
            if path and not os.path.isfile(path):
                raise ValueError(f"{key}: no file {path!r}")
        try:
            # a callable, so an encrypted key without its password fails instead of asking a
            # terminal for it
            context.load_cert_chain(
                files.cert, files.key or None, password=lambda: files.key_password.encode()
            )
        except (ssl.SSLError, OSError, ValueError):
            raise ValueError(
                "solr.tls.cert / solr.tls.key: not a PEM certificate with its private key (a "
                "key that does not match, or is encrypted without solr.tls.key.password)"
            ) from None
    return context
