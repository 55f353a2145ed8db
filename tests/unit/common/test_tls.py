"""Server and channel TLS from PERDURE_TLS_*: what a misconfiguration says, and the fetcher that
re-reads rotated certificate files."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import grpc
import pytest

from perdure.cli.certs_cmd import Pair, generate
from perdure.common.tls import CertificateFetcher, gateway_requires_client_cert, server_credentials
from perdure.telemetry.rpc import TLSConfigError, channel_credentials


@pytest.fixture
def certs(tmp_path: Path) -> dict[str, Pair]:
    return generate(tmp_path / "certs", [])


@pytest.fixture(autouse=True)
def no_tls(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("PERDURE_TLS_CA", "PERDURE_TLS_CERT", "PERDURE_TLS_KEY"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.delenv("PERDURE_GATEWAY_CLIENT_CERT", raising=False)


def replace(target: Path, source: Path) -> None:
    """Swap `target` for a copy of `source` the way rotations do: write aside, rename."""
    aside = target.with_name(target.name + ".new")
    aside.write_bytes(source.read_bytes())
    os.replace(aside, target)


def test_the_fetcher_answers_a_new_configuration_only_when_a_file_changed(
    certs: dict[str, Pair], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = certs["history"]
    fetcher = CertificateFetcher(server.cert, server.key, certs["ca"].cert)
    assert isinstance(fetcher.load(), grpc.ServerCertificateConfiguration)
    assert fetcher() is None
    other = generate(tmp_path / "other", [])["history"]
    replace(server.cert, other.cert)
    replace(server.key, other.key)
    assert isinstance(fetcher(), grpc.ServerCertificateConfiguration)
    assert fetcher() is None
    server.key.unlink()  # mid-rotation: keep serving with what was loaded
    assert fetcher() is None
    server.key.mkdir()  # unreadable: the same, and say so
    with caplog.at_level(logging.WARNING):
        assert fetcher() is None
    assert f"PERDURE_TLS_KEY={server.key}: cannot read it" in caplog.text


def test_server_credentials_need_a_whole_pair_and_the_ca_for_client_auth(
    certs: dict[str, Pair], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert server_credentials("history", require_client_auth=True) is None  # plaintext
    monkeypatch.setenv("PERDURE_TLS_CERT", str(certs["history"].cert))
    with pytest.raises(SystemExit, match=r"history: PERDURE_TLS_CERT is set .* PERDURE_TLS_KEY"):
        server_credentials("history", require_client_auth=True)
    monkeypatch.setenv("PERDURE_TLS_KEY", str(certs["history"].key))
    with pytest.raises(SystemExit, match="PERDURE_TLS_CA is not"):
        server_credentials("history", require_client_auth=True)
    assert isinstance(server_credentials("gateway", False), grpc.ServerCredentials)
    monkeypatch.setenv("PERDURE_TLS_CA", str(certs["ca"].cert.with_name("absent.pem")))
    with pytest.raises(SystemExit, match=r"PERDURE_TLS_CA=.*absent\.pem: cannot read it"):
        server_credentials("history", require_client_auth=True)
    monkeypatch.setenv("PERDURE_TLS_CA", str(certs["ca"].cert))
    assert isinstance(server_credentials("history", True), grpc.ServerCredentials)


def test_channels_are_tls_with_a_ca_and_present_a_whole_pair(
    certs: dict[str, Pair], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PERDURE_TLS_CERT", str(certs["worker"].cert))
    assert channel_credentials() is None  # no CA: plaintext, as before TLS existed
    monkeypatch.setenv("PERDURE_TLS_CA", str(certs["ca"].cert))
    with pytest.raises(TLSConfigError, match="PERDURE_TLS_KEY is not"):
        channel_credentials()
    monkeypatch.setenv("PERDURE_TLS_KEY", str(certs["worker"].key))
    assert isinstance(channel_credentials(), grpc.ChannelCredentials)
    monkeypatch.delenv("PERDURE_TLS_CERT")
    monkeypatch.delenv("PERDURE_TLS_KEY")
    assert isinstance(channel_credentials(), grpc.ChannelCredentials)  # server-only TLS


@pytest.mark.parametrize(
    ("setting", "required"), [(None, False), ("optional", False), ("REQUIRE", True)]
)
def test_the_gateway_client_cert_setting(
    monkeypatch: pytest.MonkeyPatch, setting: str | None, required: bool
) -> None:
    if setting is not None:
        monkeypatch.setenv("PERDURE_GATEWAY_CLIENT_CERT", setting)
    assert gateway_requires_client_cert() is required


def test_an_unknown_gateway_client_cert_setting_stops_the_gateway(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PERDURE_GATEWAY_CLIENT_CERT", "yes")
    with pytest.raises(SystemExit, match="must be require or optional, not 'yes'"):
        gateway_requires_client_cert()
