"""Builds as history sees them: the build that started each run (recorded by its first load,
store.ADVANCE_FENCE) and how many open runs each build still holds, which tells an operator
when an old build's workers can stop (AdminService.ListBuilds)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import grpc

from perdure.common import errors, namespaces
from perdure.history.appends import JournalBase
from perdure.history.fencing import OPEN
from perdure.history.rows import fetch_all
from perdure.internal.history.v1 import history_service_pb2 as hpb

if TYPE_CHECKING:
    from perdure.history.journal import Journal

Context = grpc.aio.ServicerContext[Any, Any]

# Served by workflows_open_build_idx; runs no worker has loaded yet have no build.
OPEN_RUNS_BY_BUILD = f"""
SELECT task_queue, build_id, workflow_type, count(*) AS open_runs
FROM history.workflows
WHERE namespace = %s AND build_id IS NOT NULL AND status IN {OPEN}
GROUP BY task_queue, build_id, workflow_type
ORDER BY task_queue, build_id, workflow_type
"""


class BuildRuns(JournalBase):
    """Open runs counted by the build that started them."""

    async def open_runs_by_build(self, namespace: str) -> list[hpb.BuildRunCount]:
        """One count per task queue (its public name), build and workflow type."""
        async with self._pool.connection() as conn:
            rows = await fetch_all(conn, OPEN_RUNS_BY_BUILD, [namespace])
        return [
            hpb.BuildRunCount(
                task_queue=namespaces.split(row["task_queue"])[1],
                build_id=row["build_id"],
                workflow_type=row["workflow_type"],
                open_runs=row["open_runs"],
            )
            for row in rows
        ]


class BuildsApi:
    """HistoryService.CountOpenRunsByBuild."""

    _journal: Journal

    @errors.unary
    async def CountOpenRunsByBuild(
        self, request: hpb.CountOpenRunsByBuildRequest, context: Context
    ) -> hpb.CountOpenRunsByBuildResponse:
        namespace = namespaces.resolve(request.namespace)
        counts = await self._journal.open_runs_by_build(namespace)
        return hpb.CountOpenRunsByBuildResponse(counts=counts)
