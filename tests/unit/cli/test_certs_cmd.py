"""`perdure certs dev`'s files: a CA, and per process a certificate it signed and a private key."""

from __future__ import annotations

import ipaddress
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from perdure.cli.certs_cmd import CLIENTS, SERVICES, generate
from perdure.common.service_identity import SERVICE_URI_PREFIX, service_names_in


def load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_each_process_gets_a_pair_the_ca_signed(tmp_path: Path) -> None:
    files = generate(tmp_path / "certs", ["perdure.internal", "10.0.0.5"])
    ca = load(files["ca"].cert)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    for name in (*SERVICES, *CLIENTS):
        cert = load(files[name].cert)
        cert.verify_directly_issued_by(ca)
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        dns = set(names.get_values_for_type(x509.DNSName))
        ips = set(names.get_values_for_type(x509.IPAddress))
        uris = names.get_values_for_type(x509.UniformResourceIdentifier)
        if name in SERVICES:
            # A server answers on its own name and the hosts given, and proves it is a service.
            assert dns == {"localhost", name, "perdure.internal"}, name
            assert ips == {ipaddress.ip_address(a) for a in ("127.0.0.1", "::1", "10.0.0.5")}
            assert uris == [f"{SERVICE_URI_PREFIX}{name}"]
        else:
            # A worker's or a client's names no host to impersonate and proves no service.
            assert (dns, ips) == (set(), set()), name
            assert uris == [f"spiffe://perdure/{name}"]
            assert service_names_in(files[name].cert.read_bytes()) == ()
        usages = set(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
        expected = {ExtendedKeyUsageOID.CLIENT_AUTH}
        if name in SERVICES:  # a worker or a program only ever dials out
            expected.add(ExtendedKeyUsageOID.SERVER_AUTH)
        assert usages == expected, name


def test_keys_are_readable_by_the_owner_only(tmp_path: Path) -> None:
    for pair in generate(tmp_path / "certs", []).values():
        assert stat.S_IMODE(pair.key.stat().st_mode) == 0o600, pair.key
        assert stat.S_IMODE(pair.cert.stat().st_mode) == 0o644, pair.cert


def test_existing_files_are_kept_unless_forced(tmp_path: Path) -> None:
    files = generate(tmp_path, [])
    ca = files["ca"].cert.read_bytes()
    with pytest.raises(FileExistsError, match="--force"):
        generate(tmp_path, [])
    assert files["ca"].cert.read_bytes() == ca
    generate(tmp_path, [], force=True)
    assert files["ca"].cert.read_bytes() != ca
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no leftovers
