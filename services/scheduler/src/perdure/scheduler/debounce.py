"""Debounced runs: a later due time replaces the earlier one of a run no worker was granted
yet (history's start_keys.py). Scheduling requests otherwise only ever bring a due time
forward (due.py's ENQUEUE), so a debounced run's is moved after it, in its transaction."""

from __future__ import annotations

from perdure.scheduler.model import DueTask

# A run's own task whose first grant has not come (a grant records the session's build, even
# an empty one) takes the later time; one granted, closed or of another run stays as it is.
DELAY_UNGRANTED = """
UPDATE scheduler.tasks t
SET run_at = d.run_at, due_reason = NULL, updated_at = now()
FROM unnest(%s::text[], %s::timestamptz[], %s::bigint[]) AS d(workflow_id, run_at, run_number)
WHERE t.workflow_id = d.workflow_id AND t.step_id = '' AND t.run_number = d.run_number
  AND t.build_id IS NULL AND t.lease_owner IS NULL AND t.run_at IS NOT NULL AND NOT t.closed
"""


def delay_columns(tasks: list[DueTask]) -> list[list[object]]:
    """DELAY_UNGRANTED's columns for the delaying tasks among `tasks`."""
    delayed = [t for t in tasks if t.delays and t.run_at is not None and not t.step_id]
    return [
        [t.workflow_id for t in delayed],
        [t.run_at for t in delayed],
        [t.run_number for t in delayed],
    ]
