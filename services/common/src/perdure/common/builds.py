"""Build ids: which version of a worker's code a session runs (Hello.build_id), and the build a
run was started by (LoadJournalRequest.build_id). Routing by build is the scheduler's
(perdure/scheduler/builds.py); deriving one from the code is the SDKs'."""

from __future__ import annotations

from perdure.common import errors

MAX_BUILD_ID = 64


def build_id_of(field: str, value: str) -> str:
    """A build id a worker sent, checked: at most MAX_BUILD_ID printable characters, with no
    space at either end ("" is a worker that declares none)."""
    if len(value) > MAX_BUILD_ID or not value.isprintable() or value != value.strip():
        raise errors.invalid_argument(
            f"{field} must be at most {MAX_BUILD_ID} printable characters with no space at "
            f"either end (say a release tag or a commit hash), not {value[:70]!r}"
        )
    return value
