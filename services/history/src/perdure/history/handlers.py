"""History's gRPC servicers, assembled by audience: the public workflow API
(workflow_api.py, its pushed reads in watch_api.py) and the admin API (admin_api.py) make
HistoryService, which only the gateway calls; the workers' journal calls (journal_api.py)
and their Session stream (session.py) make JournalService. Requests are validated in
validation.py."""

from __future__ import annotations

from perdure.api.worker.v1 import journal_service_pb2_grpc as jgrpc
from perdure.history import keys
from perdure.history.admin_api import AdminApi
from perdure.history.builds import BuildsApi
from perdure.history.commit_feed import CommitFeed
from perdure.history.journal import Journal
from perdure.history.retention_api import RetentionApi
from perdure.history.session import JournalSessions
from perdure.history.storage_api import StorageApi
from perdure.history.watch_api import WatchApi
from perdure.history.workflow_api import WorkflowApi
from perdure.internal.history.v1 import history_service_pb2_grpc as hgrpc


class HistoryServicer(
    WorkflowApi,
    WatchApi,
    AdminApi,
    BuildsApi,
    StorageApi,
    RetentionApi,
    hgrpc.HistoryServiceServicer,
):
    """What the gateway asks of history, after it has validated the request."""

    def __init__(self, journal: Journal, key_ring: keys.KeyRing, feed: CommitFeed) -> None:
        self._journal = journal
        self._keys = key_ring
        self._feed = feed


class JournalServicer(JournalSessions, jgrpc.JournalServiceServicer):
    """The worker protocol's journal calls, each checked against the lease's fence."""
