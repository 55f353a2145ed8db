"""After quiesce: the client's log and the database against the guarantees. Every check adds a
plain sentence to `violations`; the counts are the scenario's numbers for the report."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import psycopg

from tests.chaos.long_steps import overlapping_bodies
from tests.chaos.workload import FAILED, HEALED, OK, SIGNAL, STRAY, Op, Workload

TERMINAL = ("COMPLETED", "CANCELLED", "FAILED", "PARKED", "TERMINATED")
CLOSING_EVENTS = (
    "WORKFLOW_COMPLETED",
    "WORKFLOW_FAILED",
    "WORKFLOW_PARKED",
    "WORKFLOW_CANCELLED",
    "WORKFLOW_TERMINATED",
)


@dataclass
class Report:
    """What a scenario did and what the checks found."""

    workflows: int = 0
    completed: int = 0
    cancelled: int = 0
    steps_executed: int = 0
    effects: int = 0
    duplicates_prevented: int = 0  # executions of a step whose effect already stood
    duplicate_requests: int = 0  # starts and signals sent again after their acknowledgement
    signals_acknowledged: int = 0
    signals_failed: int = 0
    signals_indeterminate: int = 0
    timers: int = 0
    ops: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """One line of numbers."""
        return (
            f"workflows={self.workflows} (completed {self.completed}, cancelled "
            f"{self.cancelled}) executions={self.steps_executed} effects={self.effects} "
            f"duplicate-executions-absorbed={self.duplicates_prevented} "
            f"duplicate-requests={self.duplicate_requests} signals ok/failed/indeterminate="
            f"{self.signals_acknowledged}/{self.signals_failed}/{self.signals_indeterminate} "
            f"timers={self.timers} ops={dict(self.ops)} violations={len(self.violations)}"
        )


def check(conn: psycopg.Connection, workload: Workload) -> Report:
    """Run every check over the workflows whose ids start with the workload's prefix."""
    like = f"{workload.prefix}-%"
    report = Report()
    report.ops = Counter(f"{op.kind}:{op.outcome}" for op in workload.ops)
    report.duplicate_requests = sum(op.duplicate for op in workload.ops)
    runs = {row[0]: row for row in conn.execute(_RUNS, [like]).fetchall()}
    report.workflows = len(runs)
    report.completed = sum(1 for row in runs.values() if row[1] == "COMPLETED")
    report.cancelled = sum(1 for row in runs.values() if row[1] == "CANCELLED")
    _check_outcomes(report, workload, runs)
    _check_journals(report, conn, like)
    _check_effects(report, conn, like, workload, runs)
    _check_timers(report, conn, like)
    _check_signals(report, conn, like, workload, runs)
    _check_after_heal(report, workload)
    report.violations += overlapping_bodies(conn)  # one executor per lease
    return report


# The workloads' results are JSON: read as jsonb here (history stores the bytes sent).
_RUNS = """
SELECT workflow_id, status, convert_from(result, 'UTF8')::jsonb AS result, failure, event_count
FROM history.workflows WHERE workflow_id LIKE %s
"""


def _check_outcomes(report: Report, workload: Workload, runs: dict[str, Any]) -> None:
    """Acknowledged starts exist and ended; nothing runs that nobody started; no run failed."""
    acknowledged = {
        op.workflow_id for op in workload.ops if op.kind == "start" and op.outcome == OK
    }
    for workflow_id in sorted(acknowledged - runs.keys()):
        report.violations.append(f"{workflow_id}: start acknowledged, run lost")
    for workflow_id in sorted(runs.keys() - workload.shapes.keys()):
        report.violations.append(f"{workflow_id}: a run nobody started")
    for workflow_id, (_, status, _, failure, _) in sorted(runs.items()):
        if status not in TERMINAL:
            report.violations.append(f"{workflow_id}: still {status} after quiesce")
        elif status not in ("COMPLETED", "CANCELLED"):
            report.violations.append(f"{workflow_id}: ended {status}: {failure}")


_JOURNALS = """
SELECT w.workflow_id, w.event_count, count(e.event_id), coalesce(max(e.event_id), 0),
       count(*) FILTER (WHERE e.event_type = ANY(%s)),
       count(*) FILTER (WHERE e.fence > 0 AND e.fence < e.previous_fence)
FROM history.workflows w
LEFT JOIN (
    SELECT workflow_id, event_id, event_type, fence,
           -- the highest fence a worker wrote with before this event (0: not a worker's)
           max(fence) FILTER (WHERE fence > 0) OVER (
               PARTITION BY workflow_id ORDER BY event_id
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS previous_fence
    FROM history.events WHERE workflow_id LIKE %s
) e USING (workflow_id)
WHERE w.workflow_id LIKE %s
GROUP BY w.workflow_id, w.event_count
"""


_ATTEMPTS_TWICE = """
SELECT workflow_id, step_id, attempt, count(*) FROM history.events
WHERE workflow_id LIKE %s AND event_type = 'STEP_ATTEMPT_FAILED'
GROUP BY workflow_id, step_id, attempt HAVING count(*) > 1
"""


def _check_journals(report: Report, conn: psycopg.Connection, like: str) -> None:
    """Event ids 1..n without gaps; one closing event; a lease's writes never follow a newer
    lease's (the fences of worker-written events never go down); a failed attempt is
    journaled once, however often its record was sent."""
    rows = conn.execute(_JOURNALS, [list(CLOSING_EVENTS), like, like]).fetchall()
    for workflow_id, event_count, events, highest, closings, regressions in rows:
        if not event_count == events == highest:
            report.violations.append(
                f"{workflow_id}: journal not gapless ({events} events, highest id {highest}, "
                f"event_count {event_count})"
            )
        if closings != 1:
            report.violations.append(f"{workflow_id}: {closings} closing events, not one")
        if regressions:
            report.violations.append(
                f"{workflow_id}: {regressions} events written with a fence older than an "
                "earlier event's (a stale lease's write was accepted)"
            )
    for workflow_id, step_id, attempt, copies in conn.execute(_ATTEMPTS_TWICE, [like]):
        report.violations.append(
            f"{workflow_id}: failed attempt {attempt} of {step_id} journaled {copies} times"
        )


_EFFECTS = """
SELECT f.workflow_id, f.step, f.key, f.amount,
       convert_from(COALESCE(s.payload, (SELECT p.data FROM history.payloads p
                                         WHERE p.sha256 = s.payload_sha256)), 'UTF8')::jsonb,
       s.step_id
FROM chaos.effects f
LEFT JOIN history.events s
  ON s.workflow_id = f.workflow_id AND s.step_name = f.step AND s.event_type = 'STEP_COMPLETED'
WHERE f.workflow_id LIKE %s
"""
_EXECUTIONS = "SELECT count(*) FROM chaos.executions WHERE workflow_id LIKE %s"


def _check_effects(
    report: Report, conn: psycopg.Connection, like: str, workload: Workload, runs: dict[str, Any]
) -> None:
    """One effect per step, keyed by the step's stable idempotency key, agreeing with what the
    journal recorded; a completed run has every effect and a total that adds them up."""
    effects: dict[str, dict[str, tuple[str, int]]] = defaultdict(dict)
    for workflow_id, step, key, amount, recorded, step_id in conn.execute(_EFFECTS, [like]):
        report.effects += 1
        if step in effects[workflow_id]:
            report.violations.append(f"{workflow_id}: two effects for step {step}")
        effects[workflow_id][step] = (key, amount)
        if recorded is not None:
            if key != f"{workflow_id}:{step_id}":
                report.violations.append(f"{workflow_id}/{step}: effect key {key} is not stable")
            if (recorded["key"], recorded["amount"]) != (key, amount):
                report.violations.append(
                    f"{workflow_id}/{step}: journal recorded {recorded}, the effect is {key}"
                )
    executions = conn.execute(_EXECUTIONS, [like]).fetchone()
    report.steps_executed = executions[0] if executions else 0
    report.duplicates_prevented = report.steps_executed - report.effects
    for workflow_id, (_, status, result, _, _) in runs.items():
        shape = workload.shapes.get(workflow_id)
        if status != "COMPLETED" or shape is None:
            continue
        expected = {f"effect-{i}" for i in range(1, shape["steps"] + 1)}
        expected |= {"after-timer"} if shape["sleep"] else set()
        if set(effects[workflow_id]) != expected:
            report.violations.append(
                f"{workflow_id}: effects {sorted(effects[workflow_id])}, "
                f"expected {sorted(expected)}"
            )
        if result["total"] != shape["steps"] * (shape["steps"] + 1) // 2:
            report.violations.append(f"{workflow_id}: total {result['total']} for {shape}")


_TIMERS = """
SELECT t.workflow_id, t.due_at, f.applied_at
FROM history.events t
JOIN chaos.effects f ON f.workflow_id = t.workflow_id AND f.step = 'after-timer'
WHERE t.workflow_id LIKE %s AND t.event_type = 'TIMER_STARTED'
"""


def _check_timers(report: Report, conn: psycopg.Connection, like: str) -> None:
    """The step after a timer took effect at or after the timer's due time (database clock)."""
    for workflow_id, due_at, applied_at in conn.execute(_TIMERS, [like]):
        report.timers += 1
        if applied_at < due_at:
            report.violations.append(
                f"{workflow_id}: timer due {due_at} fired early, the next step ran at {applied_at}"
            )


_RECEIVED = """
SELECT r.workflow_id, r.signal_id, r.name,
       COALESCE(r.payload, (SELECT p.data FROM history.payloads p
                            WHERE p.sha256 = r.payload_sha256)),
       (SELECT count(*) FROM history.events c
        WHERE c.workflow_id = r.workflow_id AND c.event_type = 'SIGNAL_CONSUMED'
          AND r.event_id = ANY(c.consumed))
FROM history.events r
WHERE r.workflow_id LIKE %s AND r.event_type = 'SIGNAL_RECEIVED'
"""


def _check_signals(
    report: Report, conn: psycopg.Connection, like: str, workload: Workload, runs: dict[str, Any]
) -> None:
    """Acknowledged signals received once, failed ones never, indeterminate ones at most once;
    each received tick taken once, strays never; a completed run got its ticks in order."""
    outcomes: dict[str, set[str]] = defaultdict(set)
    for op in workload.ops:
        if op.kind == "signal":
            outcomes[op.signal_id].add(op.outcome)
    received: Counter[str] = Counter()
    for workflow_id, signal_id, name, _, consumptions in conn.execute(_RECEIVED, [like]):
        received[signal_id] += 1
        if signal_id not in outcomes:
            report.violations.append(f"{workflow_id}: received {signal_id} nobody sent")
        wanted = 1 if name == SIGNAL and runs[workflow_id][1] == "COMPLETED" else 0
        checked = name == STRAY or runs[workflow_id][1] == "COMPLETED"
        if checked and consumptions != wanted:
            report.violations.append(f"{workflow_id}: {signal_id} taken {consumptions} times")
    for signal_id, seen in outcomes.items():
        if OK in seen:
            report.signals_acknowledged += 1
            if received[signal_id] != 1:
                report.violations.append(
                    f"{signal_id}: acknowledged, received {received[signal_id]} times"
                )
        elif seen == {FAILED}:
            report.signals_failed += 1
            if received[signal_id]:
                report.violations.append(f"{signal_id}: failed, yet received")
        else:
            report.signals_indeterminate += 1
            if received[signal_id] > 1:
                report.violations.append(f"{signal_id}: indeterminate, received twice")
    for workflow_id, (_, status, result, _, _) in runs.items():
        shape = workload.shapes.get(workflow_id)
        if status == "COMPLETED" and shape and result["ticks"] != list(range(shape["signals"])):
            report.violations.append(f"{workflow_id}: ticks {result['ticks']} for {shape}")


def _check_after_heal(report: Report, workload: Workload) -> None:
    """Once healed, every call is decided, and only calls that must fail fail (a stray signal
    or a cancel reaching a run that has ended)."""
    for op in workload.ops:
        if op.phase != HEALED or op.outcome == OK:
            continue
        expected = (
            op.outcome == FAILED
            and op.code == "FAILED_PRECONDITION"
            and (op.kind == "cancel" or op.signal_name == STRAY)
        )
        if not expected:
            report.violations.append(f"after heal: {_describe(op)}")


def _describe(op: Op) -> str:
    return f"{op.kind} {op.workflow_id} {op.signal_id} {op.outcome} {op.code}".replace("  ", " ")
