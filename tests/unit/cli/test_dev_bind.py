"""`perdure dev --bind`: where the local cluster listens, and how its processes reach it."""

from __future__ import annotations

import pytest

from perdure.cli.dev_cmd import Bind


@pytest.mark.parametrize(
    ("given", "listen", "address", "loopback"),
    [
        ("127.0.0.1", "127.0.0.1:7400", "127.0.0.1:7400", True),  # the default
        ("127.0.0.2", "127.0.0.2:7400", "127.0.0.2:7400", True),
        ("::1", "[::1]:7400", "[::1]:7400", True),
        ("[::1]", "[::1]:7400", "[::1]:7400", True),
        ("localhost", "localhost:7400", "localhost:7400", True),
        # Every interface: its own processes (and the person) still connect over loopback.
        ("0.0.0.0", "0.0.0.0:7400", "127.0.0.1:7400", False),
        ("::", "[::]:7400", "[::1]:7400", False),
        ("192.0.2.10", "192.0.2.10:7400", "192.0.2.10:7400", False),
        ("fd00::5", "[fd00::5]:7400", "[fd00::5]:7400", False),
    ],
)
def test_listen_and_connect_addresses(
    given: str, listen: str, address: str, loopback: bool
) -> None:
    bind = Bind.of(given)
    assert (bind.listen(7400), bind.address(7400), bind.loopback) == (listen, address, loopback)
    said = bind.said()
    assert bind.host in said
    if loopback:
        assert "loopback" in said and "--bind HOST to change" in said
    else:
        assert "reachable from other machines" in said and "API key" in said


@pytest.mark.parametrize("given", ["", "  ", "no-such-host.invalid"])
def test_an_address_that_names_nothing_is_refused(given: str) -> None:
    with pytest.raises(ValueError):
        Bind.of(given)
