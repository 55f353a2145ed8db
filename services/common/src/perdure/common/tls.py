"""Server TLS from PERDURE_TLS_CERT/KEY/CA, re-read when the files change."""

from __future__ import annotations

import logging
import os
import ssl
from dataclasses import dataclass
from pathlib import Path

import grpc

from perdure.telemetry.rpc import TLSConfigError, TLSFiles, read_pem

log = logging.getLogger(__name__)

CLIENT_CERT_MODES = ("require", "optional")


def gateway_requires_client_cert() -> bool:
    """PERDURE_GATEWAY_CLIENT_CERT: `require` a client certificate, or leave it `optional`
    (the default: the gateway is the public API, its callers may not hold certificates)."""
    mode = os.environ.get("PERDURE_GATEWAY_CLIENT_CERT", "optional").strip().lower()
    if mode not in CLIENT_CERT_MODES:
        raise SystemExit(f"PERDURE_GATEWAY_CLIENT_CERT must be require or optional, not {mode!r}")
    return mode == "require"


def _signature(path: Path) -> tuple[int, int, int] | None:
    """What tells a rewritten or replaced file: mtime, size and inode (None if missing)."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return (stat.st_mtime_ns, stat.st_size, stat.st_ino)


@dataclass
class _Pem:
    """One file of the server's configuration: its variable, path and signature when read."""

    variable: str
    path: Path
    seen: tuple[int, int, int] | None = None

    def changed(self) -> bool:
        # A missing file is mid-rotation (removed, not yet replaced): keep what we have.
        now = _signature(self.path)
        return now is not None and now != self.seen

    def read(self) -> bytes:
        # The signature before the read: a write racing the read shows as a change next time.
        signature = _signature(self.path)
        data = read_pem(self.variable, self.path)
        self.seen = signature
        return data


def _pems(cert: Path, key: Path, ca: Path | None) -> list[_Pem]:
    """A server's files: its certificate and key, and the CA if it has one."""
    pems = [_Pem("PERDURE_TLS_CERT", cert), _Pem("PERDURE_TLS_KEY", key)]
    return [*pems, _Pem("PERDURE_TLS_CA", ca)] if ca is not None else pems


class CertificateFetcher:
    """Builds the server's certificate configuration, and again whenever a file changes
    (mtime, size or inode): gRPC calls it before every handshake, so rotated files apply to
    new connections without a restart."""

    def __init__(self, cert: Path, key: Path, ca: Path | None) -> None:
        self._files = _pems(cert, key, ca)

    def load(self) -> grpc.ServerCertificateConfiguration:
        """The configuration from the files as they are now (TLSConfigError if unreadable)."""
        cert, key, *ca = (pem.read() for pem in self._files)
        return grpc.ssl_server_certificate_configuration(
            [(key, cert)], root_certificates=ca[0] if ca else None
        )

    def __call__(self) -> grpc.ServerCertificateConfiguration | None:
        """A new configuration when a file changed, else None (no change)."""
        if not any(pem.changed() for pem in self._files):
            return None
        try:
            configuration = self.load()
        except TLSConfigError as error:  # keep serving with the previous certificate
            log.warning("certificate reload failed, keeping the current one: %s", error)
            return None
        log.info("certificate files changed: reloaded %s", self._files[0].path)
        return configuration


def _server_files(name: str, require_client_auth: bool) -> tuple[Path, Path, Path | None] | None:
    """A server's certificate, key and CA from PERDURE_TLS_*, or None (plaintext) when no
    certificate is set; TLSConfigError when the configuration is incomplete."""
    files = TLSFiles.from_env()
    files.check_pair()
    if files.cert is None or files.key is None:
        return None
    if require_client_auth and files.ca is None:
        raise TLSConfigError(
            f"PERDURE_TLS_CERT is set ({files.cert}) but PERDURE_TLS_CA is not: the {name} "
            "requires client certificates and needs the CA that signs them"
        )
    return files.cert, files.key, files.ca


def server_credentials(name: str, require_client_auth: bool) -> grpc.ServerCredentials | None:
    """TLS credentials from PERDURE_TLS_*, or None (plaintext) when no certificate is set.

    Raises:
        SystemExit: naming the variable and file, when the configuration is incomplete or a
            file cannot be read.
    """
    try:
        files = _server_files(name, require_client_auth)
        if files is None:
            return None
        fetcher = CertificateFetcher(*files)
        initial = fetcher.load()
    except TLSConfigError as error:
        raise SystemExit(f"{name}: {error}") from None
    # The stubs omit the None ("no change") that gRPC documents for the fetcher.
    return grpc.dynamic_ssl_server_credentials(
        initial,
        fetcher,  # type: ignore[arg-type]
        require_client_authentication=require_client_auth,
    )


class HttpsContext:
    """An HTTPS port's ssl.SSLContext from PERDURE_TLS_*: the server's certificate, and the CA
    its clients' certificates must come from when they are required. `reload()` re-reads the
    files in place when they changed, for the connections that follow."""

    def __init__(self, cert: Path, key: Path, ca: Path | None, require_client_auth: bool) -> None:
        self._files = _pems(cert, key, ca)
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        if require_client_auth:
            self.context.verify_mode = ssl.CERT_REQUIRED
        self._load()

    def _load(self) -> None:
        for pem in self._files:
            pem.read()  # readable, and its signature noted
        cert, key, *ca = (pem.path for pem in self._files)
        self.context.load_cert_chain(cert, key)
        if ca and self.context.verify_mode == ssl.CERT_REQUIRED:
            self.context.load_verify_locations(cafile=ca[0])

    def reload(self) -> None:
        """Re-read the files if one changed; on failure keep the current ones."""
        if not any(pem.changed() for pem in self._files):
            return
        try:
            self._load()
        except (TLSConfigError, ssl.SSLError, OSError) as error:
            log.warning("certificate reload failed, keeping the current one: %s", error)
            return
        log.info("certificate files changed: reloaded %s", self._files[0].path)


def https_context(name: str, require_client_auth: bool) -> HttpsContext | None:
    """TLS for an HTTPS port from PERDURE_TLS_*, or None (plaintext) when no certificate is
    set; SystemExit naming the variable and file when the configuration is incomplete."""
    try:
        files = _server_files(name, require_client_auth)
        return None if files is None else HttpsContext(*files, require_client_auth)
    except (TLSConfigError, ssl.SSLError) as error:
        raise SystemExit(f"{name}: {error}") from None
