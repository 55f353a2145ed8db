"""Lease proofs prove one lease, for one key, for its term, under the services' secret: any
change to what they bind, another secret, a lapsed term or a mangled proof proves nothing."""

from __future__ import annotations

import pytest

from perdure.common.lease_proofs import PROOF_BYTES, LeaseProofs
from perdure.common.service_identity import InternalSecrets

SECRET = "s" * 32
OTHER = "o" * 32
NOW = 1_800_000_000.0
LEASE = ("run-1", "", 7, "key-a")


def proofs(sent: str | None, *accepted: str) -> LeaseProofs:
    return LeaseProofs(InternalSecrets(sent, tuple(accepted)))


def test_a_proof_proves_its_lease_for_its_key_until_its_term_ends() -> None:
    scheduler, history = proofs(SECRET, SECRET), proofs(SECRET, SECRET)
    proof = scheduler.sign(*LEASE, expires=NOW + 10)
    assert len(proof) == PROOF_BYTES
    assert history.proves(proof, *LEASE, now=NOW)
    assert history.proves(proof, *LEASE, now=NOW + 9.99)
    assert not history.proves(proof, *LEASE, now=NOW + 10)  # the term is over


@pytest.mark.parametrize(
    "claimed",
    [
        ("run-2", "", 7, "key-a"),  # another run
        ("run-1", "step", 7, "key-a"),  # a step task of the run
        ("run-1", "", 8, "key-a"),  # a later fence
        ("run-1", "", 6, "key-a"),  # an earlier one
        ("run-1", "", 7, "key-b"),  # another key
        ("run-1\u0000", "", 7, "key-a"),  # ids are bound whole, whatever they hold
    ],
)
def test_a_proof_proves_nothing_of_another_lease_or_key(claimed: tuple[str, str, int, str]) -> None:
    proof = proofs(SECRET, SECRET).sign(*LEASE, expires=NOW + 10)
    assert not proofs(SECRET, SECRET).proves(proof, *claimed, now=NOW)


def test_only_an_accepted_secret_makes_a_proof_history_takes() -> None:
    made_elsewhere = proofs(OTHER, OTHER).sign(*LEASE, expires=NOW + 10)
    assert not proofs(SECRET, SECRET).proves(made_elsewhere, *LEASE, now=NOW)
    # Rotating: the new secret accepted everywhere before anyone signs with it.
    assert proofs(SECRET, SECRET, OTHER).proves(made_elsewhere, *LEASE, now=NOW)
    # Services that share no secret (certificates only) make no proof and take none.
    assert proofs(None).sign(*LEASE, expires=NOW + 10) == b""
    assert not proofs(None).proves(made_elsewhere, *LEASE, now=NOW)


def test_a_mangled_or_extended_proof_proves_nothing() -> None:
    proof = proofs(SECRET, SECRET).sign(*LEASE, expires=NOW + 10)
    history = proofs(SECRET, SECRET)
    longer_term = (int((NOW + 3600) * 1000)).to_bytes(8, "big") + proof[8:]
    for mangled in (
        b"",
        proof[:-1],
        proof + b"\x00",
        bytes([proof[0] ^ 1]) + proof[1:],
        proof[:-1] + bytes([proof[-1] ^ 1]),
        longer_term,  # a term stretched by its holder
        bytes(PROOF_BYTES),
    ):
        assert not history.proves(mangled, *LEASE, now=NOW), mangled
