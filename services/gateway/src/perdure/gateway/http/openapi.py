"""The OpenAPI 3.1 document of the JSON routes, made from the routes and the messages'
descriptors: it cannot drift from what the server accepts and answers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.gateway.http import feed, result, stream_feed
from perdure.gateway.http.routes import ROUTES, Route

Schema = dict[str, Any]
_INTEGER = (
    FieldDescriptor.TYPE_INT32,
    FieldDescriptor.TYPE_SINT32,
    FieldDescriptor.TYPE_SFIXED32,
    FieldDescriptor.TYPE_UINT32,
    FieldDescriptor.TYPE_FIXED32,
)
_INTEGER_64 = (
    FieldDescriptor.TYPE_INT64,
    FieldDescriptor.TYPE_SINT64,
    FieldDescriptor.TYPE_SFIXED64,
    FieldDescriptor.TYPE_UINT64,
    FieldDescriptor.TYPE_FIXED64,
)
# The well-known types in the proto3 JSON mapping, and payloads as this API shows them.
_WELL_KNOWN: dict[str, Schema] = {
    "google.protobuf.Value": {},
    "google.protobuf.Struct": {"type": "object"},
    "google.protobuf.ListValue": {"type": "array"},
    "google.protobuf.Timestamp": {"type": "string", "format": "date-time"},
    "google.protobuf.Duration": {"type": "string", "pattern": r"^-?[0-9]+(\.[0-9]+)?s$"},
    # A payload is its own JSON value, or bytes as {"encoding": "binary/plain", "base64": ...}
    # (see payloads.py).
    "perdure.api.common.v1.Payload": {
        "description": "Any JSON value, kept exactly; bytes as "
        '{"encoding": "binary/plain", "base64": "..."}'
    },
}
ERROR: Schema = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "status", "reason", "message"],
            "properties": {
                "code": {"type": "string", "description": "the gRPC status code's name"},
                "status": {"type": "integer"},
                "reason": {"type": "string", "description": "a stable reason, e.g. NOT_FOUND"},
                "message": {"type": "string"},
            },
        }
    },
}


def document(version: str) -> dict[str, Any]:
    """The whole document."""
    schemas: dict[str, Schema] = {"Error": ERROR}
    paths: dict[str, dict[str, Any]] = {}
    for route in ROUTES:
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(route, schemas)
    paths[feed.PATH] = {"get": _feed_operation()}
    paths[stream_feed.PATH] = {"get": _stream_feed_operation()}
    paths[result.PATH] = {"get": _result_operation(schemas)}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Perdure",
            "version": version,
            "description": "WorkflowService over HTTP/JSON: messages in the proto3 JSON "
            "mapping with .proto field names (docs/http_api.md).",
        },
        "components": {
            "schemas": schemas,
            "securitySchemes": {"apiKey": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"apiKey": []}, {}],
        "paths": paths,
    }


def descriptor(message: type[Message]) -> Descriptor:
    """A message's descriptor (typed by the stubs as either of protobuf's implementations)."""
    return cast(Descriptor, message.DESCRIPTOR)


def _operation(route: Route, schemas: dict[str, Schema]) -> dict[str, Any]:
    request = descriptor(route.request)
    parameters = [_path_parameter(name) for name in route.path_fields]
    operation: dict[str, Any] = {
        "operationId": route.name,
        "summary": route.summary,
        "parameters": parameters,
        "responses": {
            "200": _response(_reference(descriptor(route.response), schemas, answer=True)),
            "default": _response({"$ref": "#/components/schemas/Error"}, "an error"),
        },
    }
    if route.method == "GET":
        parameters += [
            _query_parameter(field, schemas)
            for field in request.fields
            if field.name not in route.path_fields and field.message_type is None
        ]
    else:
        if "namespace" in request.fields_by_name:  # not signal-with-start's: start.namespace
            parameters.append(_query_parameter(request.fields_by_name["namespace"], schemas))
        body = _message(request, schemas, answer=False, leave_out=route.path_fields)
        operation["requestBody"] = {"required": False, **_content(body)}
    return operation


def _feed_operation() -> dict[str, Any]:
    return _sse_operation(
        "FollowWorkflow",
        "The run's events as Server-Sent Events, pushed as they are committed, until it closes",
        [_path_parameter("workflow_id"), *_optional_query("after_event_id")],
        "events: history (a HistoryEvent; id: its event id), status (the run's status and "
        "WorkflowInfo, when it changes), then end (the closing status)",
    )


def _stream_feed_operation() -> dict[str, Any]:
    return _sse_operation(
        "FollowStream",
        "A stream its steps emit, as Server-Sent Events: each frame once, resets included",
        [
            _path_parameter("workflow_id"),
            _path_parameter("stream"),
            *_optional_query("after_seq"),
            {"name": "follow", "in": "query", "schema": {"enum": ["true", "false"]}},
        ],
        "events: frame (a StreamFrame; id: its seq), then end (the run's closing status) "
        "once the run is closed and every frame sent",
    )


def _result_operation(schemas: dict[str, Schema]) -> dict[str, Any]:
    answer = _reference(descriptor(api.GetWorkflowResultResponse), schemas, answer=True)
    return {
        "operationId": "GetWorkflowResult",
        "summary": "Wait up to `wait` seconds (at most 300) for the run to close; its summary",
        "parameters": [
            _path_parameter("workflow_id"),
            *_optional_query(),
            {"name": "wait", "in": "query", "schema": {"type": "string"}},
        ],
        "responses": {
            "200": _response(answer),
            "default": _response({"$ref": "#/components/schemas/Error"}, "an error"),
        },
    }


def _optional_query(*cursor: str) -> list[dict[str, Any]]:
    """The namespace and run id a read may name, and its resume cursor, if any."""
    names = ["namespace", "run_id", *cursor]
    return [{"name": name, "in": "query", "schema": {"type": "string"}} for name in names]


def _sse_operation(
    operation_id: str, summary: str, parameters: list[dict[str, Any]], events: str
) -> dict[str, Any]:
    return {
        "operationId": operation_id,
        "summary": summary,
        "parameters": [
            *parameters,
            {"name": "Last-Event-ID", "in": "header", "schema": {"type": "string"}},
        ],
        "responses": {
            "200": {
                "description": events,
                "content": {"text/event-stream": {"schema": {"type": "string"}}},
            },
            "default": _response({"$ref": "#/components/schemas/Error"}, "an error"),
        },
    }


def _path_parameter(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}


def _query_parameter(field: FieldDescriptor, schemas: dict[str, Schema]) -> dict[str, Any]:
    return {"name": field.name, "in": "query", "schema": _field(field, schemas, answer=False)}


def _content(schema: Schema) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}


def _response(schema: Schema, description: str = "the answer") -> dict[str, Any]:
    return {"description": description, **_content(schema)}


def _reference(descriptor: Descriptor, schemas: dict[str, Schema], answer: bool) -> Schema:
    """A $ref to a message's schema, adding it (and what it uses) to `schemas`."""
    if descriptor.full_name in _WELL_KNOWN:
        return _WELL_KNOWN[descriptor.full_name]
    name = descriptor.full_name
    if name not in schemas:
        schemas[name] = {}  # placed first: a message that contains itself refers to it
        schemas[name] = _message(descriptor, schemas, answer)
    return {"$ref": f"#/components/schemas/{name}"}


def _message(
    descriptor: Descriptor,
    schemas: dict[str, Schema],
    answer: bool,
    leave_out: Sequence[str] = (),
) -> Schema:
    """A message as a JSON object: in answers every field without presence is there."""
    fields = [field for field in descriptor.fields if field.name not in leave_out]
    schema: Schema = {
        "type": "object",
        "additionalProperties": False,
        "properties": {field.name: _field(field, schemas, answer) for field in fields},
    }
    if answer:
        schema["required"] = [field.name for field in fields if not field.has_presence]
    return schema


def _field(field: FieldDescriptor, schemas: dict[str, Schema], answer: bool) -> Schema:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        value = field.message_type.fields_by_name["value"]
        return {"type": "object", "additionalProperties": _single(value, schemas, answer)}
    if _is_list_or_map(field):
        return {"type": "array", "items": _single(field, schemas, answer)}
    return _single(field, schemas, answer)


def _single(field: FieldDescriptor, schemas: dict[str, Schema], answer: bool) -> Schema:
    """The schema of one value of a field."""
    if field.message_type is not None:
        return _reference(field.message_type, schemas, answer)
    if field.enum_type is not None:
        return {"enum": [value.name for value in field.enum_type.values]}
    if field.type in _INTEGER:
        return {"type": "integer", "format": "int32"}
    if field.type in _INTEGER_64:
        # Strings in the JSON mapping; numbers accepted in requests.
        number = {"type": "string", "pattern": r"^-?[0-9]+$", "format": "int64"}
        return number if answer else {"type": ["string", "integer"], "format": "int64"}
    if field.type in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return {"type": "number"}
    if field.type == FieldDescriptor.TYPE_BOOL:
        return {"type": "boolean"}
    if field.type == FieldDescriptor.TYPE_BYTES:
        return {"type": "string", "contentEncoding": "base64"}
    return {"type": "string"}


def _is_list_or_map(field: FieldDescriptor) -> bool:
    return bool(field.is_repeated)
