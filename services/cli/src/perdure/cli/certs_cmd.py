"""`perdure certs dev`: a development CA and a certificate for each kind of process, for mTLS."""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from perdure.common.service_identity import SERVICE_URI_PREFIX

DEFAULT_DIR = ".perdure/certs"
SERVICES = ("gateway", "history", "scheduler")
# Services are servers and also clients of each other; workers and programs are clients only.
CLIENTS = ("worker", "client")
HOSTS = ("localhost", "127.0.0.1", "::1")
# Every certificate names its kind of process; only services' carry SERVICE_URI_PREFIX, so a
# worker's or a client's certificate can never call an internal RPC.
PROCESS_URI = "spiffe://perdure/"
CA_DAYS = 3650
LEAF_DAYS = 825  # the longest validity some TLS clients accept
CLOCK_SKEW = datetime.timedelta(minutes=5)  # valid a little before now, for skewed clocks


@dataclass(frozen=True)
class Pair:
    """Where one certificate and its private key are written."""

    cert: Path
    key: Path


def pairs(directory: Path) -> dict[str, Pair]:
    """The files of `directory`: ca, then each service, worker and client."""
    return {
        name: Pair(directory / f"{name}.pem", directory / f"{name}-key.pem")
        for name in ("ca", *SERVICES, *CLIENTS)
    }


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `certs dev`."""
    parser = subparsers.add_parser("certs", help="make TLS certificates")
    kinds = parser.add_subparsers(dest="certs_command", required=True)
    dev = kinds.add_parser(
        "dev",
        help="a development CA and a certificate+key for gateway, history, scheduler, worker "
        "and client (not for production: the CA key sits beside them)",
    )
    dev.add_argument(
        "--dir", default=DEFAULT_DIR, help=f"where to write them (default {DEFAULT_DIR})"
    )
    dev.add_argument(
        "--host",
        action="append",
        default=[],
        metavar="NAME",
        help="another DNS name or IP address the services answer on (repeatable); always "
        f"included: {', '.join(HOSTS)} and the service's own name",
    )
    dev.add_argument("--force", action="store_true", help="overwrite existing files")


def _subject(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Perdure development"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _alt_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _write(path: Path, data: bytes, mode: int) -> None:
    """Write atomically (a server re-reading its files never sees half of one) with `mode`."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, mode)  # before the data: a key is never readable by others
        with os.fdopen(fd, "wb") as sink:
            sink.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def generate(directory: Path, hosts: list[str], *, force: bool = False) -> dict[str, Pair]:
    """Write a CA and a pair per process into `directory`; return where each went.

    Raises:
        FileExistsError: when a file is there already and `force` is false.
    """
    files = pairs(directory)
    existing = [path for pair in files.values() for path in (pair.cert, pair.key) if path.exists()]
    if existing and not force:
        names = ", ".join(path.name for path in existing)
        raise FileExistsError(f"{directory} already holds {names} (--force to overwrite)")
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _subject("Perdure development CA")
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    _write(files["ca"].key, _key_pem(ca_key), 0o600)
    _write(files["ca"].cert, ca_cert.public_bytes(serialization.Encoding.PEM), 0o644)
    for name in (*SERVICES, *CLIENTS):
        key = ec.generate_private_key(ec.SECP256R1())
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH]
        alt_names: list[x509.GeneralName] = [x509.UniformResourceIdentifier(PROCESS_URI + name)]
        if name in SERVICES:
            # A server: the names it answers on, and the URI that proves it is a service.
            usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
            hosts_of = dict.fromkeys([*HOSTS, name, *hosts])
            alt_names = [
                x509.UniformResourceIdentifier(SERVICE_URI_PREFIX + name),
                *(_alt_name(host) for host in hosts_of),
            ]
        cert = (
            x509.CertificateBuilder()
            .subject_name(_subject(name))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - CLOCK_SKEW)
            .not_valid_after(now + datetime.timedelta(days=LEAF_DAYS))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
            )
            .sign(ca_key, hashes.SHA256())
        )
        _write(files[name].key, _key_pem(key), 0o600)
        _write(files[name].cert, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return files


def run(args: argparse.Namespace) -> int:
    """Generate, then print the variables each process needs."""
    directory = Path(args.dir).resolve()
    try:
        files = generate(directory, args.host, force=args.force)
    except FileExistsError as error:
        print(f"perdure certs dev: {error}", file=sys.stderr)
        return 1
    print(
        f"perdure certs dev: a CA and certificates for {', '.join([*SERVICES, *CLIENTS])} "
        f"in {directory}"
    )
    print("Set in each process's environment (the CA key ca-key.pem only signs; keep it out):")
    for name in (*SERVICES, *CLIENTS):
        role = "the perdure CLI, perdure.client.Client" if name == "client" else name
        print(
            f"  {role}:\n    PERDURE_TLS_CA={files['ca'].cert} "
            f"PERDURE_TLS_CERT={files[name].cert} PERDURE_TLS_KEY={files[name].key}"
        )
    print(
        "history and scheduler then require a client certificate from this CA; the gateway "
        "too with PERDURE_GATEWAY_CLIENT_CERT=require."
    )
    return 0
