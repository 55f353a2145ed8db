"""Namespaces: every workflow and task queue belongs to one; nothing crosses between them.

Inside the platform a name of namespace `ns` is qualified as `@ns/name` (the default
namespace's names stay as they are): workflow ids, task queues and everything keyed by them
are then unique per namespace with no table keyed twice. Public names never start with `@`,
so a qualified name cannot be forged from another namespace.
"""

from __future__ import annotations

import re

from perdure.common import errors

DEFAULT = "default"
_PATTERN = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
_MARK = "@"


def resolve(value: str) -> str:
    """A namespace named in a request, validated; the default one when empty."""
    if not value:
        return DEFAULT
    if not _PATTERN.fullmatch(value):
        raise errors.invalid_argument(
            f"namespace {value[:70]!r} is not valid: use up to 63 lowercase letters, digits "
            "or '-', starting and ending with a letter or digit"
        )
    return value


def require_public(field: str, value: str) -> None:
    """A public name must not look qualified."""
    if value.startswith(_MARK):
        raise errors.invalid_argument(f"{field} must not start with {_MARK!r}")


def qualify(namespace: str, name: str) -> str:
    """The platform's name for `name` of `namespace`."""
    return name if namespace == DEFAULT else f"{_MARK}{namespace}/{name}"


def split(qualified: str) -> tuple[str, str]:
    """The namespace and the public name of a qualified name."""
    if not qualified.startswith(_MARK):
        return DEFAULT, qualified
    namespace, _, name = qualified[1:].partition("/")
    return namespace, name


def namespace_of(qualified: str) -> str:
    """The namespace a qualified name belongs to."""
    return split(qualified)[0]
