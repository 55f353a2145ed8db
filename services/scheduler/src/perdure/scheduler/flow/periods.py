"""Budget periods, on the database clock's UTC calendar: the one spelling of "the current
period's start" for the claim that reserves and the settlement that spends."""

from __future__ import annotations


def current_period(period: str) -> str:
    """SQL: the start of the current period of a budget whose period column is `period`."""
    return f"""(CASE {period} WHEN 'none' THEN '-infinity'::timestamptz
        ELSE date_trunc({period}, now(), 'UTC') END)"""


def rolled(column: str, period: str, period_start: str) -> str:
    """SQL: a per-period counter as of the current period (0 once a new period began)."""
    return f"(CASE WHEN {current_period(period)} > {period_start} THEN 0 ELSE {column} END)"
