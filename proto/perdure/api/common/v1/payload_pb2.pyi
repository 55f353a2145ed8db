from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class Payload(_message.Message):
    __slots__ = ("encoding", "data")
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    encoding: str
    data: bytes
    def __init__(self, encoding: _Optional[str] = ..., data: _Optional[bytes] = ...) -> None: ...

class PayloadRef(_message.Message):
    __slots__ = ("sha256", "encoding", "size")
    SHA256_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    sha256: bytes
    encoding: str
    size: int
    def __init__(self, sha256: _Optional[bytes] = ..., encoding: _Optional[str] = ..., size: _Optional[int] = ...) -> None: ...
