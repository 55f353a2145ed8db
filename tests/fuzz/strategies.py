"""Hypothesis strategies for protobuf requests, from their descriptors: every field set or
not, with values chosen to break things (empty, huge, unknown enums, extreme numbers, deep
JSON), and wire-level mutations of valid requests (bit flips, cuts, wrong wire types, invalid
UTF-8) that no client library would send."""

from __future__ import annotations

import json
from typing import Any

from google.protobuf import descriptor as d
from google.protobuf import message, message_factory
from hypothesis import strategies as st

from perdure.api.common.v1.payload_pb2 import Payload

MAX_DEPTH = 3
# Strings a person or a buggy client sends: empty, blank, long, control characters, paths,
# other scripts, and ids, types and signal names that exist in the fuzzed cluster.
INTERESTING_TEXT = (
    "",
    " ",
    "default",
    "fuzz",
    "fuzz-1",
    "five_steps",
    "two_signals",
    "go",
    "early",
    "a" * 201,
    "x" * 70_000,
    "\x00",
    "\n\t",
    "../../etc/passwd",
    "Grüße 🙂",
    "$internal",
    "wf-%s",
)
_INT_BOUNDS = {
    d.FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    d.FieldDescriptor.TYPE_SINT32: (-(2**31), 2**31 - 1),
    d.FieldDescriptor.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    d.FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    d.FieldDescriptor.TYPE_SINT64: (-(2**63), 2**63 - 1),
    d.FieldDescriptor.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    d.FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    d.FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1),
    d.FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
    d.FieldDescriptor.TYPE_FIXED64: (0, 2**64 - 1),
}


def text() -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(INTERESTING_TEXT), st.text(max_size=40))


def integers(low: int, high: int) -> st.SearchStrategy[int]:
    edges = [v for v in (low, high, -1, 0, 1, 2, 1000) if low <= v <= high]
    return st.one_of(st.sampled_from(edges), st.integers(low, high))


def payloads(depth: int = 40) -> st.SearchStrategy[Payload]:
    """Payloads: JSON of every kind (integers of any size, NaN and infinities, nested deeper
    than the limit allows), text that is not JSON, raw bytes, and unknown encodings."""
    leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), text())
    values = st.recursive(
        leaves,
        lambda children: st.one_of(
            st.lists(children, max_size=3), st.dictionaries(text(), children, max_size=3)
        ),
        max_leaves=8,
    )
    json_text = st.one_of(
        values.map(json.dumps),  # NaN and Infinity included: not JSON
        st.integers(30, depth).map(lambda levels: "[" * levels + "1" + "]" * levels),
        text(),
    )
    return st.one_of(
        st.builds(
            Payload,
            encoding=st.sampled_from(["", "json/plain"]),
            data=json_text.map(lambda value: value.encode("utf-8", "surrogatepass")),
        ),
        st.builds(Payload, encoding=st.just("binary/plain"), data=st.binary(max_size=64)),
        st.builds(Payload, encoding=text(), data=st.binary(max_size=16)),
    )


def messages(descriptor: Any, depth: int = 0) -> st.SearchStrategy[message.Message]:
    """Instances of the message type: each field left unset or given a value."""
    cls = message_factory.GetMessageClass(descriptor)
    if descriptor.full_name == Payload.DESCRIPTOR.full_name:
        return payloads()
    fields = {
        field.name: st.one_of(st.none(), _field_values(field, depth))
        for field in descriptor.fields
        if depth < MAX_DEPTH or field.type != d.FieldDescriptor.TYPE_MESSAGE
    }
    return st.builds(lambda values: _build(cls, values), st.fixed_dictionaries(fields))


def _build(cls: type[message.Message], values: dict[str, Any]) -> message.Message:
    built = cls()
    for name, value in values.items():
        if value is None:
            continue
        field = getattr(built, name)
        if isinstance(value, dict):  # a map
            for key, item in value.items():
                if isinstance(item, message.Message):
                    field[key].CopyFrom(item)
                else:
                    field[key] = item
        elif isinstance(value, list):
            field.extend(value)
        elif isinstance(value, message.Message):
            field.CopyFrom(value)
        else:
            setattr(built, name, value)
    return built


def _field_values(field: d.FieldDescriptor, depth: int) -> st.SearchStrategy[Any]:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        key, value = (
            field.message_type.fields_by_name["key"],
            field.message_type.fields_by_name["value"],
        )
        return st.dictionaries(_scalar(key, depth), _scalar(value, depth), max_size=3)
    single = _scalar(field, depth)
    if field.is_repeated:
        return st.lists(single, max_size=3)
    return single


def _scalar(field: d.FieldDescriptor, depth: int) -> st.SearchStrategy[Any]:
    kind = field.type
    if kind == d.FieldDescriptor.TYPE_MESSAGE:
        return messages(field.message_type, depth + 1)
    if kind == d.FieldDescriptor.TYPE_STRING:
        return text()
    if kind == d.FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=40)
    if kind == d.FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if kind in (d.FieldDescriptor.TYPE_DOUBLE, d.FieldDescriptor.TYPE_FLOAT):
        return st.floats(width=64 if kind == d.FieldDescriptor.TYPE_DOUBLE else 32)
    if kind == d.FieldDescriptor.TYPE_ENUM:
        return integers(-3, 40)  # open enums: unknown numbers travel as they are
    low, high = _INT_BOUNDS[kind]
    return integers(low, high)


def mutated(valid: bytes) -> st.SearchStrategy[bytes]:
    """A valid serialized request, broken on the wire."""
    size = max(len(valid), 1)
    return st.one_of(
        # A bit flipped somewhere.
        st.builds(
            lambda i, bit: _flip(valid, i % size, bit), st.integers(0, 10_000), st.integers(0, 7)
        ),
        # Cut short.
        st.builds(lambda n: valid[: n % size], st.integers(0, 10_000)),
        # Noise appended or prepended.
        st.builds(lambda noise: valid + noise, st.binary(min_size=1, max_size=20)),
        st.builds(lambda noise: noise + valid, st.binary(min_size=1, max_size=20)),
        # Field 1 (a string in every request) as invalid UTF-8, or as a varint.
        st.just(valid + b"\x0a\x02\xff\xfe"),
        st.just(valid + b"\x08\x96\x01"),
        # A length prefix larger than what follows.
        st.just(valid + b"\x0a\xff\xff\xff\x0f"),
    )


def _flip(data: bytes, index: int, bit: int) -> bytes:
    if not data:
        return b"\xff"
    changed = bytearray(data)
    changed[index] ^= 1 << bit
    return bytes(changed)
