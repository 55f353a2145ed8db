"""Validation of JSON payloads: every problem named with its path, before anything is written."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import struct_pb2

from perdure.common.payload import MAX_PAYLOAD_BYTES, MAX_PAYLOAD_DEPTH, validate_payload
from tests.unit.api_errors import assert_invalid, rejected


def number(x: float) -> struct_pb2.Value:
    return struct_pb2.Value(number_value=x)


def as_list(*items: struct_pb2.Value) -> struct_pb2.Value:
    value = struct_pb2.Value()
    value.list_value.values.extend(items)
    return value


def as_struct(**fields: struct_pb2.Value) -> struct_pb2.Value:
    value = struct_pb2.Value()
    for key, item in fields.items():
        value.struct_value.fields[key].CopyFrom(item)
    return value


def nested(depth: int, kind: str) -> struct_pb2.Value:
    """A number `depth` lists (or objects) deep: the root is at depth 0, the number at `depth`.

    Built in place: copying a message this deep goes through protobuf's parser, which refuses
    to nest beyond 100 messages.
    """
    root = struct_pb2.Value()
    node = root
    for _ in range(depth):
        node = node.list_value.values.add() if kind == "list" else node.struct_value.fields["k"]
    node.number_value = 1
    return root


# --- payloads ------------------------------------------------------------------------------------


def test_ordinary_json_payload_passes() -> None:
    value = as_struct(
        name=struct_pb2.Value(string_value="x"),
        count=number(3),
        ok=struct_pb2.Value(bool_value=True),
        nothing=struct_pb2.Value(null_value=struct_pb2.NULL_VALUE),
        items=as_list(number(1), as_struct(deep=number(-2.5))),
    )
    validate_payload("input", value)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_numbers_are_rejected(bad: float) -> None:
    error = rejected(lambda: validate_payload("input", number(bad)))
    assert_invalid(error, "input is not JSON", "not a finite number")


def test_non_finite_number_deep_inside_is_rejected_with_its_path() -> None:
    value = as_struct(a=as_list(number(1), as_struct(b=number(float("nan")))))
    error = rejected(lambda: validate_payload("input", value))
    assert_invalid(error, "input.a[1].b is not JSON")


def test_unset_root_value_is_rejected() -> None:
    error = rejected(lambda: validate_payload("input", struct_pb2.Value()))
    assert_invalid(error, "input is not a JSON value: no kind is set")


def test_unset_value_in_struct_is_rejected_with_its_path() -> None:
    value = as_struct(ok=number(1), missing=struct_pb2.Value())
    error = rejected(lambda: validate_payload("input", value))
    assert_invalid(error, "input.missing is not a JSON value")


def test_unset_value_in_list_is_rejected_with_its_index() -> None:
    value = as_list(number(1), number(2), struct_pb2.Value())
    error = rejected(lambda: validate_payload("input", value))
    assert_invalid(error, "input[2] is not a JSON value")


def test_unset_value_nested_in_struct_in_list_is_found() -> None:
    value = as_struct(rows=as_list(as_struct(cell=as_list(struct_pb2.Value()))))
    error = rejected(lambda: validate_payload("input", value))
    assert_invalid(error, "input.rows[0].cell[0] is not a JSON value")


def test_empty_struct_and_list_are_valid() -> None:
    empty_struct = struct_pb2.Value()
    empty_struct.struct_value.SetInParent()
    empty_list = struct_pb2.Value()
    empty_list.list_value.SetInParent()
    validate_payload("input", empty_struct)
    validate_payload("input", empty_list)
    validate_payload("input", as_list(empty_struct, empty_list))


@pytest.mark.parametrize("kind", ["list", "struct"])
def test_depth_limit_is_allowed(kind: str) -> None:
    validate_payload("input", nested(MAX_PAYLOAD_DEPTH, kind))


def test_list_depth_over_the_limit_is_rejected() -> None:
    value = nested(MAX_PAYLOAD_DEPTH + 1, "list")
    error = rejected(lambda: validate_payload("input", value))
    assert_invalid(
        error,
        "input"
        + "[0]" * (MAX_PAYLOAD_DEPTH + 1)
        + f" nests deeper than {MAX_PAYLOAD_DEPTH} levels",
    )


def test_struct_depth_over_the_limit_is_rejected() -> None:
    value = nested(MAX_PAYLOAD_DEPTH + 1, "struct")
    error = rejected(lambda: validate_payload("input", value))
    assert_invalid(
        error,
        "input" + ".k" * (MAX_PAYLOAD_DEPTH + 1) + f" nests deeper than {MAX_PAYLOAD_DEPTH} levels",
    )


def string_of_size(total_bytes: int) -> struct_pb2.Value:
    """A string Value whose serialized size is exactly `total_bytes`."""
    length = total_bytes
    for _ in range(5):  # the length prefix shrinks with the string: converge on the size
        value = struct_pb2.Value(string_value="x" * length)
        if value.ByteSize() == total_bytes:
            return value
        length += total_bytes - value.ByteSize()
    raise AssertionError(f"no string Value serializes to exactly {total_bytes} bytes")


def test_payload_of_exactly_the_limit_passes() -> None:
    validate_payload("input", string_of_size(MAX_PAYLOAD_BYTES))


def test_payload_over_2_mib_is_resource_exhausted() -> None:
    size = MAX_PAYLOAD_BYTES + 1
    error = rejected(lambda: validate_payload("input", string_of_size(size)))
    assert error.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert error.reason == "PAYLOAD_TOO_LARGE"
    assert f"input is {size} bytes" in error.message
    assert f"the limit is {2 * 1024 * 1024} bytes" in error.message


def test_size_is_checked_before_content() -> None:
    value = as_list(string_of_size(MAX_PAYLOAD_BYTES), number(float("nan")))
    error = rejected(lambda: validate_payload("input", value))
    assert error.code == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_a_nul_in_a_string_or_a_key_is_rejected_with_its_path() -> None:
    in_string = as_struct(a=as_list(struct_pb2.Value(string_value="x\x00y")))
    assert_invalid(rejected(lambda: validate_payload("input", in_string)), "input.a[0]", "NUL")
    in_key = struct_pb2.Value()
    in_key.struct_value.fields["k\x00"].string_value = "fine"
    assert_invalid(rejected(lambda: validate_payload("result", in_key)), "result key", "NUL")
