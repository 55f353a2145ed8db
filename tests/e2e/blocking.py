"""Driving the `blocks_in_third` test workflow: start it, read its ledger."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from perdure.client import Client
from tests.fixtures.cluster import wait_until
from tests.fixtures.ledger import ledger_lines

WAIT = 90.0


def runs_per_step(ledger: Path) -> Counter[str]:
    """How many times each step body finished, from the ledger."""
    lines = ledger_lines(ledger)
    return Counter(line.split()[0] for line in lines if not line.startswith("start "))


def started(ledger: Path, step: str) -> list[str]:
    """The pids that started a blocking step."""
    lines = ledger_lines(ledger)
    return [line.split()[2] for line in lines if line.startswith(f"start {step} ")]


def start_blocked(client: Client, workflow_id: str, ledger: Path, gate: Path) -> None:
    """Start `blocks_in_third` and return once its third step waits for `gate`."""
    client.start_workflow(
        "blocks_in_third", {"ledger": str(ledger), "gate": str(gate)}, workflow_id=workflow_id
    )
    wait_until(lambda: started(ledger, "step_3"), WAIT, f"step 3 of {workflow_id} to start")
