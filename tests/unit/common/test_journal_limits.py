"""The journal's page and payload-reference sizes: their defaults, and a bad setting stops the
service with a message naming the variable."""

from __future__ import annotations

import pytest

from perdure.common import limits
from perdure.telemetry.rpc import MAX_ITEM_BYTES


def test_the_defaults_are_4_mib_pages_and_16_kib_references(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PERDURE_JOURNAL_PAGE_BYTES", raising=False)
    monkeypatch.delenv("PERDURE_PAYLOAD_REF_BYTES", raising=False)
    assert limits.journal_page_bytes() == 4 * 1024 * 1024
    assert limits.payload_ref_bytes() == 16 * 1024


@pytest.mark.parametrize("value", ["0", str(MAX_ITEM_BYTES // 4 + 1), "lots"])
def test_a_page_size_out_of_range_stops_the_service(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("PERDURE_JOURNAL_PAGE_BYTES", value)
    with pytest.raises(SystemExit, match="PERDURE_JOURNAL_PAGE_BYTES"):
        limits.journal_page_bytes()


def test_a_reference_size_of_zero_stops_the_service(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERDURE_PAYLOAD_REF_BYTES", "0")
    with pytest.raises(SystemExit, match="PERDURE_PAYLOAD_REF_BYTES"):
        limits.payload_ref_bytes()
