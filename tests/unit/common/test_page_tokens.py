"""History's page tokens and page sizes: opaque round trips, precise refusal of anything else."""

from __future__ import annotations

import base64

import grpc
import pytest

from perdure.common.errors import ApiError
from perdure.common.page_tokens import decode_page_token, encode_page_token
from perdure.history import reads


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode()


@pytest.mark.parametrize("position", [0, 1, 9, 10, 99, 12345, 2**31, 2**63 - 1])
def test_round_trip(position: int) -> None:
    token = encode_page_token(position)
    assert token  # an empty token would mean "first page"
    assert decode_page_token(token) == position


def test_round_trip_over_a_range_of_positions() -> None:
    for position in range(0, 3000, 7):
        token = encode_page_token(position)
        assert decode_page_token(token) == position
        assert token.isascii() and "+" not in token and "/" not in token


def test_tokens_are_distinct_and_opaque() -> None:
    tokens = {encode_page_token(position) for position in range(500)}
    assert len(tokens) == 500
    assert encode_page_token(42) != "42"


def test_empty_token_means_the_first_page() -> None:
    assert decode_page_token("") is None


@pytest.mark.parametrize(
    "token",
    [
        "garbage!",
        "p:5",  # the plain text, not encoded
        "42",
        "%%%%",
        "é",
        "=",
        b64(b"q:5"),  # wrong prefix
        b64(b"P:5"),
        b64(b"page:5"),
        b64(b"p5"),  # no separator
        b64(b"p:"),  # no number
        b64(b"p:-1"),
        b64(b"p:+1"),
        b64(b"p:1.5"),
        b64(b"p: 1"),
        b64(b"p:1x"),
        b64("p:²".encode()),  # a digit to str.isdigit, not to int()
        b64(b"\xff\xfe:12"),  # not UTF-8
        b64(b":5"),
        encode_page_token(7)[:-2],  # truncated
    ],
)
def test_foreign_tokens_are_invalid_page_tokens(token: str) -> None:
    with pytest.raises(ApiError) as caught:
        decode_page_token(token)
    error = caught.value
    assert error.code == grpc.StatusCode.INVALID_ARGUMENT
    assert error.reason == "INVALID_PAGE_TOKEN"
    assert "page_token" in error.message
    assert "next_page_token" in error.message
    assert error.__cause__ is None and error.__suppress_context__


def test_page_size_zero_means_the_default() -> None:
    assert reads.page_size(0) == reads.DEFAULT_PAGE_SIZE == 100


@pytest.mark.parametrize("requested", [1, 2, 99, 100, 101, 999, 1000])
def test_page_size_within_the_cap_is_kept(requested: int) -> None:
    assert reads.page_size(requested) == requested


@pytest.mark.parametrize("requested", [1001, 5000, 2**31 - 1])
def test_page_size_is_capped(requested: int) -> None:
    assert reads.page_size(requested) == reads.MAX_PAGE_SIZE == 1000
