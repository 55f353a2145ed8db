"""Payloads in the HTTP API's JSON. A JSON payload is its own JSON text inside the body,
exactly: numbers as written, never read through a float (2**64 + 1 stays 18446744073709551617,
1.0 stays 1.0). A bytes payload is {"encoding": "binary/plain", "base64": "..."}, both ways."""

from __future__ import annotations

import base64
import binascii
import json
import re
import uuid
from dataclasses import dataclass
from typing import Any

from google.protobuf.descriptor import Descriptor
from google.protobuf.message import Message

from perdure.api.common.v1.payload_pb2 import Payload
from perdure.common.payload import BINARY, JSON

_PAYLOAD = Payload.DESCRIPTOR.full_name
_BINARY_KEYS = frozenset({"encoding", "base64"})


class Number(str):
    """A JSON number as written in a request body."""


class PayloadError(ValueError):
    """A payload field whose value cannot be taken (a bytes payload with bad base64)."""


@dataclass(frozen=True)
class ExactJson:
    """A payload's JSON text, to be written into an answer as it is."""

    text: str


def loads(raw: bytes) -> Any:
    """A request body decoded with every number kept as written (Number)."""
    return json.loads(raw, parse_int=Number, parse_float=Number, parse_constant=_no_constant)


class NotANumberError(ValueError):
    """NaN or Infinity in a body: Python's decoder takes them, JSON does not."""


def _no_constant(name: str) -> Any:
    raise NotANumberError(f"{name} is not a JSON number")


class PayloadMap(dict[str, Payload]):
    """The payloads of a map<string, Payload> field, by key (a fork's overrides)."""


def _is_payload_map(field: Any) -> bool:
    """A map<string, Payload> field: its payloads are exact JSON too."""
    if field.message_type is None or not field.message_type.GetOptions().map_entry:
        return False
    target = field.message_type.fields_by_name["value"].message_type
    return target is not None and target.full_name == _PAYLOAD


def take(descriptor: Descriptor | Any, fields: dict[str, Any]) -> dict[str, Any]:
    """Remove the payload fields from decoded request JSON (nested messages included) and
    return them as Payloads, by field name (a nested message's as a dict of its own)."""
    taken: dict[str, Any] = {}
    for field in descriptor.fields:
        if _is_payload_map(field):
            for key in dict.fromkeys((field.name, field.json_name)):
                if key in fields and isinstance(fields[key], dict):
                    entries = fields.pop(key).items()
                    taken[field.name] = PayloadMap(
                        {k: _payload(f"{field.name}[{k!r}]", v) for k, v in entries}
                    )
            continue
        if field.message_type is None or field.is_repeated:
            continue
        for key in dict.fromkeys((field.name, field.json_name)):
            if key not in fields:
                continue
            if field.message_type.full_name == _PAYLOAD:
                taken[field.name] = _payload(field.name, fields.pop(key))
            elif isinstance(fields[key], dict) and (inner := take(field.message_type, fields[key])):
                taken[field.name] = inner
    return taken


def put(message: Message, taken: dict[str, Any]) -> None:
    """Set the payloads `take` removed on the parsed message."""
    for name, value in taken.items():
        if isinstance(value, Payload):
            getattr(message, name).CopyFrom(value)
        elif isinstance(value, PayloadMap):
            for key, payload in value.items():
                getattr(message, name)[key].CopyFrom(payload)
        else:
            put(getattr(message, name), value)


def plain(value: Any) -> Any:
    """Decoded JSON with its numbers as Python numbers, for the fields that are no payload."""
    if isinstance(value, Number):
        return int(value) if re.fullmatch(r"-?\d+", value) else float(value)
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value


def _payload(field: str, value: Any) -> Payload:
    if isinstance(value, dict) and value.keys() == _BINARY_KEYS and value["encoding"] == BINARY:
        try:
            data = base64.b64decode(str(value["base64"]), validate=True)
        except binascii.Error as error:
            raise PayloadError(f"{field}.base64 is not base64: {error}") from None
        return Payload(encoding=BINARY, data=data)
    return Payload(encoding=JSON, data=_text(value).encode())


def _text(value: Any) -> str:
    """JSON text of decoded JSON, its numbers as they were written."""
    if isinstance(value, Number):
        return str.__str__(value)
    if isinstance(value, dict):
        items = (f"{json.dumps(key, ensure_ascii=False)}:{_text(v)}" for key, v in value.items())
        return "{" + ",".join(items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_text(item) for item in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def show(message: Message, data: Any) -> None:
    """Replace in `data` (the message's JSON mapping) each payload by what it shows: its JSON
    text (ExactJson) or its bytes as {"encoding": "binary/plain", "base64": ...}."""
    if not isinstance(data, dict) or message.DESCRIPTOR.full_name.startswith("google.protobuf."):
        return
    for field, value in message.ListFields():
        if field.message_type is None or field.name not in data:
            continue
        if field.message_type.full_name == _PAYLOAD:
            data[field.name] = (
                [shown(item) for item in value] if field.is_repeated else shown(value)
            )
        elif field.message_type.GetOptions().map_entry:
            target = field.message_type.fields_by_name["value"].message_type
            if target is not None and target.full_name == _PAYLOAD:
                data[field.name] = {key: shown(item) for key, item in value.items()}
            elif target is not None:
                for key, item in value.items():
                    show(item, data[field.name].get(str(key)))
        elif field.is_repeated:
            for item, item_data in zip(value, data[field.name], strict=False):
                show(item, item_data)
        else:
            show(value, data[field.name])


def shown(payload: Payload) -> Any:
    """How the HTTP API shows one payload."""
    if payload.encoding == BINARY:
        return {"encoding": BINARY, "base64": base64.b64encode(payload.data).decode()}
    return ExactJson(payload.data.decode() if payload.data else "null")


def dumps(data: Any, indent: int | None = None) -> str:
    """JSON text of `data` with each ExactJson written as its text (on one line: a newline
    in JSON text is only ever whitespace)."""
    token = uuid.uuid4().hex
    texts: list[str] = []

    def placeholder(value: Any) -> str:
        if not isinstance(value, ExactJson):
            raise TypeError(f"{type(value).__name__} is not JSON-serializable")
        texts.append(value.text.replace("\r", " ").replace("\n", " "))
        return f"{token}{len(texts) - 1}"

    separators = (",", ": ") if indent is not None else (",", ":")
    text = json.dumps(data, default=placeholder, indent=indent, separators=separators)
    return re.sub(f'"{token}(\\d+)"', lambda match: texts[int(match.group(1))], text)
