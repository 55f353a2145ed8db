"""Validation of payloads: an unknown encoding or data that is not JSON is refused before
anything is written; what passes is stored byte for byte."""

from __future__ import annotations

import grpc
import pytest

from perdure.api.common.v1.payload_pb2 import Payload
from perdure.common.payload import (
    MAX_PAYLOAD_BYTES,
    MAX_PAYLOAD_DEPTH,
    json_payload,
    validate_payload,
)
from tests.unit.api_errors import assert_invalid, rejected


def test_json_text_passes_unchanged() -> None:
    text = ' {"big": 18446744073709551617, "float": 1.0, "s": "\\u00e9\\u0000", "n": null} '
    assert validate_payload("input", json_payload(text)) == json_payload(text)


def test_an_empty_encoding_is_json_and_an_unset_payload_is_json_null() -> None:
    assert validate_payload("input", Payload(data=b"[1]")) == json_payload("[1]")
    assert validate_payload("input", Payload()) == json_payload("null")
    assert validate_payload("input", Payload(encoding="json/plain")) == json_payload("null")


def test_bytes_pass_as_they_are() -> None:
    raw = Payload(encoding="binary/plain", data=bytes(range(256)))
    assert validate_payload("input", raw) == raw
    empty = Payload(encoding="binary/plain")
    assert validate_payload("input", empty) == empty


def test_an_unknown_encoding_is_refused() -> None:
    error = rejected(lambda: validate_payload("input", Payload(encoding="text/yaml", data=b"")))
    assert_invalid(error, "input has encoding 'text/yaml'", "json/plain, binary/plain")


@pytest.mark.parametrize("bad", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_numbers_are_refused(bad: str) -> None:
    error = rejected(lambda: validate_payload("input", json_payload(f"[1, {bad}]")))
    assert_invalid(error, "input is not JSON", f"{bad} is not a JSON number")


@pytest.mark.parametrize("text", ["{", "[1,]", "1 2", "'x'", '"\t"', "{1: 2}"])
def test_data_that_is_not_one_json_value_is_refused(text: str) -> None:
    assert_invalid(
        rejected(lambda: validate_payload("result", json_payload(text))), "result is not JSON"
    )


def test_data_that_is_not_utf8_is_refused() -> None:
    bad = Payload(encoding="json/plain", data=b'"\xff"')
    assert_invalid(rejected(lambda: validate_payload("value", bad)), "value is not UTF-8 JSON")


@pytest.mark.parametrize(("open_", "close"), [("[", "]"), ('{"k":', "}")])
def test_depth_limit(open_: str, close: str) -> None:
    def nested(levels: int) -> Payload:
        return json_payload(open_ * levels + "1" + close * levels)

    validate_payload("input", nested(MAX_PAYLOAD_DEPTH))
    error = rejected(lambda: validate_payload("input", nested(MAX_PAYLOAD_DEPTH + 1)))
    assert_invalid(error, f"input nests deeper than {MAX_PAYLOAD_DEPTH} levels")


def test_thousands_of_levels_are_refused_as_too_deep() -> None:
    error = rejected(lambda: validate_payload("input", json_payload("[" * 100_000)))
    assert_invalid(error, "input")


def test_size_limit_is_resource_exhausted_and_checked_before_content() -> None:
    at_limit = json_payload('"' + "x" * (MAX_PAYLOAD_BYTES - 2) + '"')
    validate_payload("input", at_limit)
    over = Payload(encoding="binary/plain", data=b"x" * (MAX_PAYLOAD_BYTES + 1))
    error = rejected(lambda: validate_payload("input", over))
    assert error.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert error.reason == "PAYLOAD_TOO_LARGE"
    assert f"input is {MAX_PAYLOAD_BYTES + 1} bytes" in error.message
    not_json = json_payload("NaN" + " " * MAX_PAYLOAD_BYTES)
    assert rejected(lambda: validate_payload("input", not_json)).code == (
        grpc.StatusCode.RESOURCE_EXHAUSTED
    )
