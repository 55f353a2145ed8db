"""`make demo`: the research agent's promises, shown one by one against a fresh local cluster.

    python -m examples.research_agent.demo [--keep]

The demo starts `perdure dev` (embedded PostgreSQL, scheduler, history, gateway and a worker
serving this example and the purchasing agent) in a new temporary data directory on free
ports, then runs nine phases:

1. a run goes to approval, waits (as state, not as a process), is approved with
   `perdure approve`, and completes, sending one notification;
2. the worker is killed with SIGKILL during a slow step; `perdure dev` starts another, which
   skips the completed steps (`Skipping completed step` in its log) and finishes the run;
3. a step fails once; the failed attempt is journaled with its retry time and retried on that
   durable schedule;
4. everything, PostgreSQL included, is stopped while a run waits for approval, started again on
   the same data directory; the run is approved and completes;
5. the worker dies right after sending the notification, before the step is recorded; the
   replay sends nothing again: exactly one notification is delivered;
6. the worker dies while analyze streams its text; a reader following the run's output stream
   sees the tokens of the dead attempt, a reset, then the retry's tokens: the text it rebuilds
   is exactly what the steps returned;
7. a run waits for approval when release 2 (`releases`) adds a step before the analysis:
   `perdure replay` refuses the unguarded release against the run in flight and passes the
   one behind `ctx.patched`; once deployed, the old run completes on its own path and a new
   run takes the new step;
8. a run under a 600-token budget: each model call reserves its estimate before it runs, and
   the call that does not fit fails with BudgetExceeded without running;
9. the purchasing agent (`examples/purchasing_agent`) asks three vendors in child runs, its
   approval escalates and is decided with `perdure approve`, it buys within its token budget;
   a second run's saga cancels the order and releases the funds when no carrier can deliver;
   a third run's approval expires.

Each phase prints its evidence and a verdict; the demo ends with a PASS/FAIL summary, exits
non-zero if any phase failed, and always stops every process it started (by PID). The data
directory is removed afterwards unless a phase failed or `--keep` is given.
"""

from __future__ import annotations

import argparse
import ctypes
import itertools
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path
from typing import Any

from examples.research_agent.notifications import (
    DB_ENV,
    delivered_notifications,
    reservation_state,
)
from examples.research_agent.workflow import CRASH_AFTER_TOKENS, CRASH_EXIT_CODE, STEPS
from perdure.api.common.v1.payload_pb2 import Payload
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.api.workflow.v1 import workflow_service_pb2 as api
from perdure.cli.dev_cmd import free_base_port
from perdure.cli.flags import DEV_KEY_FILE
from perdure.client import Budget, Client, Frame, StreamText, from_payload

REPO_ROOT = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT = 120.0
PHASE_TIMEOUT = 60.0
STOP_TIMEOUT = 60.0
WORKER_CONNECTED = re.compile(r"worker \S+:(\d+) connected:")
PR_SET_PDEATHSIG = 1  # from <sys/prctl.h>


class DemoError(Exception):
    """A phase did not show what it should have."""


# -- output ---------------------------------------------------------------------------------------


def say(text: str = "") -> None:
    """One line of the demo's narration."""
    print(text, flush=True)  # noqa: T201 - the demo talks to a person


def evidence(text: str) -> None:
    """What the platform shows, indented under the narration."""
    for line in text.splitlines() or [""]:
        say(f"      {line}")


def check(condition: bool, what: str) -> None:
    """Print a verified claim, or fail the phase with it."""
    if not condition:
        raise DemoError(what)
    say(f"  [ok] {what}")


def wait_until(condition: Callable[[], Any], what: str, timeout: float = PHASE_TIMEOUT) -> Any:
    """Poll `condition()` until it returns something truthy; return it."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise DemoError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.1)


# -- the local cluster: `perdure dev` as a child process ------------------------------------------


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user (PostgreSQL runs as "pgserver")
        return True
    return True


def _parent_of(pid: int) -> int | None:
    """The parent PID from /proc (Linux); None where there is no /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def _descendants(pid: int) -> list[int]:
    """Every process below `pid` (Linux /proc; empty elsewhere)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        parent = _parent_of(int(entry.name))
        if parent is not None:
            parents[int(entry.name)] = parent
    found: list[int] = []
    frontier = [pid]
    while frontier:
        current = frontier.pop()
        children = [child for child, parent in parents.items() if parent == current]
        found.extend(children)
        frontier.extend(children)
    return found


@dataclass
class LocalCluster:
    """`perdure dev` on a data directory and three ports, started and stopped by the demo."""

    data_dir: Path
    base_port: int = field(default_factory=free_base_port)
    popen: subprocess.Popen[bytes] | None = None
    logs: list[Path] = field(default_factory=list)
    worker_module: str = "examples.research_agent"  # the code deployed: a release changes it

    @property
    def address(self) -> str:
        """The gateway."""
        return f"localhost:{self.base_port}"

    def api_key(self) -> str:
        """The admin key `perdure dev` keeps in its data directory."""
        return (self.data_dir / DEV_KEY_FILE).read_text().strip()

    @property
    def database(self) -> Path:
        """The example's SQLite database (reservations and delivered notifications)."""
        return self.data_dir / "research_agent.sqlite3"

    @property
    def log(self) -> Path:
        """The output of the current `perdure dev` (workers included)."""
        return self.logs[-1]

    def log_text(self) -> str:
        """Everything the current `perdure dev` printed so far."""
        return self.log.read_text(errors="replace")

    def env(self) -> dict[str, str]:
        """The environment of `perdure dev` and so of its worker."""
        env = {
            **os.environ,
            DB_ENV: str(self.database),
            "PERDURE_LOG_LEVEL": "INFO",
            "PYTHONUNBUFFERED": "1",
        }
        env.pop("PERDURE_WORKER_IDENTITY", None)  # the default identity carries the worker's PID
        env.pop("PERDURE_DATABASE_URL", None)  # the demo's database is its own, embedded one
        return env

    def postgres_pid(self) -> int | None:
        """The embedded PostgreSQL's PID from its postmaster.pid, if it runs."""
        try:
            pid = int((self.data_dir / "pgdata" / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        return pid if _alive(pid) else None

    def start(self) -> None:
        """Start `perdure dev`; return once the services and the worker are up."""
        if not all(_port_free(port) for port in range(self.base_port, self.base_port + 3)):
            self.base_port = free_base_port()
        self.logs.append(self.data_dir / f"dev-{len(self.logs) + 1}.log")
        command = [
            sys.executable,
            "-m",
            "perdure.cli",
            "dev",
            "--data-dir",
            str(self.data_dir),
            "--base-port",
            str(self.base_port),
            "--worker-module",
            self.worker_module,
            "--worker-module",
            "examples.purchasing_agent",  # the agent toolkit's phase
        ]
        with self.log.open("wb") as sink:
            self.popen = subprocess.Popen(
                command,
                cwd=REPO_ROOT,
                env=self.env(),
                stdout=sink,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
            )
        say(f"  $ perdure dev --data-dir {self.data_dir} --base-port {self.base_port}")
        wait_until(
            lambda: "perdure dev is up" in self.log_text() or not self.running(),
            "perdure dev to start",
            STARTUP_TIMEOUT,
        )
        if not self.running():
            raise DemoError(f"perdure dev exited at start-up:\n{self.log_text()}")
        self.wait_worker()
        evidence(
            f"pid {self.popen.pid}: gateway :{self.base_port}, history :{self.base_port + 1}, "
            f"scheduler :{self.base_port + 2}, PostgreSQL pid {self.postgres_pid()}, "
            f"worker pid {self.worker_pid()}"
        )

    def running(self) -> bool:
        """Whether `perdure dev` runs."""
        return self.popen is not None and self.popen.poll() is None

    def worker_pids(self) -> list[int]:
        """The worker PIDs in the order they connected."""
        return [int(pid) for pid in WORKER_CONNECTED.findall(self.log_text())]

    def worker_pid(self) -> int:
        """The PID of the worker that connected last."""
        pids = self.worker_pids()
        if not pids:
            raise DemoError("no worker has connected")
        return pids[-1]

    def wait_worker(self, after: int = 0) -> int:
        """Wait until a worker (other than the `after` first ones) connected; its PID."""
        wait_until(lambda: len(self.worker_pids()) > after, "a worker to connect", STARTUP_TIMEOUT)
        return self.worker_pid()

    def kill_worker(self) -> int:
        """SIGKILL the current worker (only if it is a child of our `perdure dev`)."""
        pid = self.worker_pid()
        assert self.popen is not None
        parent = _parent_of(pid)
        if parent is not None and parent != self.popen.pid:
            raise DemoError(f"pid {pid} is not a worker of our perdure dev (parent {parent})")
        os.kill(pid, signal.SIGKILL)
        return pid

    def stop(self) -> list[str]:
        """SIGTERM `perdure dev` (it stops the worker, the services and PostgreSQL); then make
        sure, PID by PID, that nothing it started is left. Returns what had to be forced."""
        forced: list[str] = []
        if self.popen is None:
            return forced
        postgres = self.postgres_pid()
        children = _descendants(self.popen.pid)
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
                forced.append(f"perdure dev (pid {self.popen.pid}) killed")
        for pid in children:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
                forced.append(f"pid {pid} killed")
        if postgres is not None:
            deadline = time.monotonic() + 20
            while _alive(postgres) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _alive(postgres):  # SIGINT: PostgreSQL's fast shutdown
                os.kill(postgres, signal.SIGINT)
                forced.append(f"PostgreSQL (pid {postgres}) stopped")
                deadline = time.monotonic() + 20
                while _alive(postgres) and time.monotonic() < deadline:
                    time.sleep(0.1)
                if _alive(postgres):
                    os.kill(postgres, signal.SIGKILL)
        return forced


def _die_with_parent() -> None:
    """In `perdure dev`, before exec: SIGTERM it if the demo dies (even by SIGKILL), so that
    it stops its processes and PostgreSQL (Linux; elsewhere the demo's `finally` does it)."""
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


# -- talking to the cluster -----------------------------------------------------------------------


def run_command(
    cluster: LocalCluster, argv: Sequence[str], shown: str, *, exit_code: int = 0
) -> str:
    """Run a command as a person would type it (`shown`) beside the cluster's `perdure dev`,
    whose admin key it finds in the data directory; print it and its output. It must exit
    with `exit_code`."""
    say(f"  $ {shown}")
    done = subprocess.run(
        [sys.executable, *argv],
        cwd=REPO_ROOT,
        env={**os.environ, "PERDURE_DATA_DIR": str(cluster.data_dir)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    output = (done.stdout + done.stderr).strip()
    if output:
        evidence(output)
    if done.returncode != exit_code:
        raise DemoError(f"`{shown}` exited with {done.returncode}, not {exit_code}")
    return done.stdout


def start_run(cluster: LocalCluster, workflow_id: str, *flags: str) -> None:
    """`python -m examples.research_agent start ...`."""
    args = ["start", "--topic", "durable agents", "--id", workflow_id, *flags]
    run_command(
        cluster,
        ["-m", "examples.research_agent", *args, "--address", cluster.address],
        "python -m examples.research_agent " + shlex.join(args),
    )


def approve(cluster: LocalCluster, workflow_id: str, comment: str) -> None:
    """`perdure approve ID --reason ...`: decides the run's pending approval record."""
    run_command(
        cluster,
        [
            *("-m", "perdure.cli", "approve", "--address", cluster.address),
            *(workflow_id, "--reason", comment),
        ],
        f"perdure approve {workflow_id} --reason {shlex.quote(comment)}",
    )


def status_name(status: int) -> str:
    """WORKFLOW_STATUS_WAITING -> WAITING."""
    return wf.WorkflowStatus.Name(status).removeprefix("WORKFLOW_STATUS_")


def decode(value: Payload) -> Any:
    """A payload as Python."""
    return from_payload(value)


def published_result(described: api.DescribeWorkflowResponse) -> dict[str, Any]:
    """A completed run's result, as JSON."""
    value = decode(described.workflow.result)
    return value if isinstance(value, dict) else {}


def published(described: api.DescribeWorkflowResponse) -> dict[str, Any]:
    """The values the run published with ctx.set_state."""
    return {key: decode(value) for key, value in described.state.items()}


def wait_for_approval_request(client: Client, workflow_id: str) -> api.DescribeWorkflowResponse:
    """Wait until the run is suspended waiting for its approval; show what describe says."""

    def waiting() -> api.DescribeWorkflowResponse | None:
        described = client.describe(workflow_id)
        if described.workflow.status in (wf.WORKFLOW_STATUS_FAILED, wf.WORKFLOW_STATUS_PARKED):
            raise DemoError(f"{workflow_id} ended: {described.workflow.failure.message}")
        ready = (
            described.workflow.status == wf.WORKFLOW_STATUS_WAITING
            and described.workflow.wait.kind == wf.WAIT_KIND_APPROVAL
            and published(described).get("phase") == "awaiting_approval"
        )
        return described if ready else None

    described: api.DescribeWorkflowResponse = wait_until(
        waiting, f"{workflow_id} to wait for its approval"
    )
    state = published(described)
    evidence(
        f"status {status_name(described.workflow.status)}, waiting for approval "
        f"{described.pending_approvals[0].approval_id} ({described.workflow.wait.name!r}); "
        f"phase = {state.get('phase')!r}\n"
        f"recommendation: {state['recommendation']['recommendation']} "
        f"(confidence {state['recommendation']['confidence']})\n"
        f"waiting_for.how: {state['waiting_for']['how']}"
    )
    return described


def wait_closed(client: Client, workflow_id: str) -> api.DescribeWorkflowResponse:
    """Wait until the run closed."""
    try:
        return client.wait(workflow_id, timeout=PHASE_TIMEOUT)
    except TimeoutError as error:
        raise DemoError(str(error)) from None


def step_table(described: api.DescribeWorkflowResponse) -> str:
    """The steps with their status, attempts and fence."""
    rows = [f"{'step':<12} {'status':<10} {'attempts':>8} {'fence':>5}"]
    for step in described.steps:
        status = wf.StepStatus.Name(step.status).removeprefix("STEP_STATUS_")
        rows.append(f"{step.step_id:<12} {status:<10} {step.attempts:>8} {step.fence:>5}")
    return "\n".join(rows)


def completed_steps(client: Client, workflow_id: str) -> list[str]:
    """The step ids of every STEP_COMPLETED event of the journal, in order."""
    return [
        event.step_id
        for event in client.history(workflow_id)
        if event.event_type == wf.EVENT_TYPE_STEP_COMPLETED and not event.step_id.startswith("$")
    ]


def check_completed(
    client: Client, cluster: LocalCluster, workflow_id: str
) -> api.DescribeWorkflowResponse:
    """The checks every approved run must pass: completed, each step once, one notification."""
    described = wait_closed(client, workflow_id)
    evidence(step_table(described))
    check(
        described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED,
        f"{workflow_id} is {status_name(described.workflow.status)}",
    )
    recorded = completed_steps(client, workflow_id)
    check(recorded == list(STEPS), "the journal records each of the 7 steps exactly once")
    delivered = delivered_notifications(workflow_id, cluster.database)
    check(len(delivered) == 1, f"notifications delivered for {workflow_id}: {len(delivered)}")
    return described


# -- the phases -----------------------------------------------------------------------------------


def phase_approval(cluster: LocalCluster, client: Client) -> None:
    """A run goes to approval, waits, is approved, completes."""
    say("The agent plans, researches twice, analyzes and recommends (five model steps, an")
    say("offline deterministic model), then asks a human. While it waits it is a row in")
    say("PostgreSQL, not a sleeping process: describe shows what it waits for.")
    start_run(cluster, "demo-approve")
    wait_for_approval_request(client, "demo-approve")
    run_command(
        cluster,
        [
            *("-m", "perdure.cli", "workflow", "--address", cluster.address),
            *("query", "demo-approve", "phase"),
        ],
        "perdure workflow query demo-approve phase",
    )
    approve(cluster, "demo-approve", "Looks right, ship it")
    described = check_completed(client, cluster, "demo-approve")
    result = decode(described.workflow.result)
    evidence(f"result: decision={result['decision']!r}, report {result['report']['title']!r}")
    evidence(f"notification: {result['notification']['delivery']}")
    check(result["decision"] == "approved", "the result records the approval")


def phase_kill(cluster: LocalCluster, client: Client) -> None:
    """SIGKILL the worker during a slow step; the next worker resumes without repeating."""
    say("research_2 is made slow (4 s). While it runs, the worker is killed with SIGKILL.")
    say("perdure dev starts another worker, which replays the journal: the steps already")
    say("recorded return their results without running again.")
    workflow_id = "demo-kill"
    start_run(cluster, workflow_id, "--slow-step", "research_2", "--slow-seconds", "4")
    running = f"research_agent {workflow_id}: running step research_2"
    wait_until(lambda: running in cluster.log_text(), "research_2 to start")
    described = wait_until(
        lambda: (d := client.describe(workflow_id)).current_step == "research_2" and d,
        "research_2 to report itself as the current step",
    )
    evidence(f"describe: current step {described.current_step!r}\n{step_table(described)}")
    connected = len(cluster.worker_pids())
    killed_at = len(cluster.log_text())
    pid = cluster.kill_worker()
    say(f"  $ kill -9 {pid}")
    new_pid = cluster.wait_worker(after=connected)
    restarted = "the worker exited with -9; starting it again"
    after = cluster.log_text()[killed_at:]
    check(restarted in after, f"perdure dev: {restarted!r} (new worker pid {new_pid})")
    wait_for_approval_request(client, workflow_id)
    after = cluster.log_text()[killed_at:]
    skipped = [line.split(": ", 1)[-1] for line in after.splitlines() if "Skipping" in line]
    evidence("new worker's log:\n" + "\n".join(dict.fromkeys(skipped)))
    for step in ("create_plan", "research_1"):
        check(f"Skipping completed step: {step}" in after, f"the new worker skipped {step}")
    approve(cluster, workflow_id, "ok")
    check_completed(client, cluster, workflow_id)
    runs = {
        step: cluster.log_text().count(f"research_agent {workflow_id}: running step {step} ")
        for step in STEPS
    }
    evidence("times each step's code ran: " + ", ".join(f"{s} {n}" for s, n in runs.items()))
    check(
        all(n == 1 for s, n in runs.items() if s != "research_2") and runs["research_2"] == 2,
        "no completed step ran twice (only the interrupted research_2 ran again)",
    )
    described = client.describe(workflow_id)
    fences = {step.step_id: step.fence for step in described.steps}
    check(
        fences["create_plan"] == fences["research_1"] < fences["research_2"],
        f"steps after the kill carry a higher fence ({fences['research_1']} -> "
        f"{fences['research_2']}): written under the new worker's lease",
    )


def phase_retry(cluster: LocalCluster, client: Client) -> None:
    """A step fails once and is retried on a durable schedule."""
    say("analyze fails on its first attempt (a temporary provider error). The failed attempt")
    say("is journaled with the time of the next one; the worker lets go of the run, and the")
    say("scheduler wakes it when the retry is due (policy: 1 s, doubling, at most 10 s).")
    workflow_id = "demo-retry"
    start_run(cluster, workflow_id, "--fail-step-once", "analyze")

    def attempt_failed() -> wf.HistoryEvent | None:
        for event in client.history(workflow_id):
            if event.event_type == wf.EVENT_TYPE_STEP_ATTEMPT_FAILED:
                return event
        return None

    event: wf.HistoryEvent = wait_until(attempt_failed, "the failed attempt to be journaled")
    described = client.describe(workflow_id)
    failed_at = event.event_time.ToDatetime(tzinfo=UTC)
    retry_at = event.due_time.ToDatetime(tzinfo=UTC)
    evidence(
        "the journal's event:\n"
        f"{wf.EventType.Name(event.event_type)}: step {event.step_id}, attempt {event.attempt}, "
        f"{event.failure.type}: {event.failure.message}\n"
        f"failed at {failed_at.time().isoformat(timespec='milliseconds')}, retry due at "
        f"{retry_at.time().isoformat(timespec='milliseconds')} "
        f"(+{(retry_at - failed_at).total_seconds():.2f}s, database clock)"
    )
    if described.workflow.status == wf.WORKFLOW_STATUS_WAITING:
        evidence(
            f"describe meanwhile: status WAITING for "
            f"{wf.WaitKind.Name(described.workflow.wait.kind)} {described.workflow.wait.name} "
            f"until {described.workflow.wait.until.ToJsonString()}"
        )
    check(
        event.step_id == "analyze" and event.attempt == 1 and retry_at > failed_at,
        "STEP_ATTEMPT_FAILED for analyze, attempt 1, with its retry time",
    )
    wait_for_approval_request(client, workflow_id)
    approve(cluster, workflow_id, "ok")
    described = check_completed(client, cluster, workflow_id)
    analyze = next(step for step in described.steps if step.step_id == "analyze")
    completed_at = analyze.complete_time.ToDatetime(tzinfo=UTC)
    check(
        analyze.attempts == 2 and completed_at >= retry_at,
        f"analyze succeeded on attempt {analyze.attempts}, after the retry time",
    )


def phase_restart(cluster: LocalCluster, client: Client) -> None:
    """Everything stops while the run waits; it starts again and the run completes."""
    say("A run waits for approval. Every process is stopped: worker, gateway, history,")
    say("scheduler and PostgreSQL. The approval may take days; nothing runs meanwhile.")
    say("Everything starts again on the same data directory, and the approval goes through.")
    workflow_id = "demo-restart"
    start_run(cluster, workflow_id)
    before = wait_for_approval_request(client, workflow_id)
    assert cluster.popen is not None
    dev_pid, postgres = cluster.popen.pid, cluster.postgres_pid()
    say(f"  $ kill -TERM {dev_pid}    # perdure dev stops its worker, services and PostgreSQL")
    forced = cluster.stop()
    check(not cluster.running() and not forced, "perdure dev stopped everything by itself")
    check(
        postgres is not None and not _alive(postgres) and cluster.postgres_pid() is None,
        f"PostgreSQL (pid {postgres}) is stopped",
    )
    cluster.start()
    client = Client(cluster.address, api_key=cluster.api_key())
    try:
        after = client.describe(workflow_id)
        evidence(
            f"after the restart: status {status_name(after.workflow.status)}, "
            f"phase = {published(after).get('phase')!r}, "
            f"{after.workflow.event_count} events (before: {before.workflow.event_count})"
        )
        check(
            after.workflow.status == wf.WORKFLOW_STATUS_WAITING
            and published(after).get("phase") == "awaiting_approval",
            "the run is still waiting for its approval",
        )
        approve(cluster, workflow_id, "approved after the restart")
        check_completed(client, cluster, workflow_id)
    finally:
        client.close()


def phase_notify(cluster: LocalCluster, client: Client) -> None:
    """The worker dies right after sending the notification; it is not sent twice."""
    say("With crash_after_notification, the worker process exits right after the mail")
    say("provider accepted the report, before the notify step is recorded. The step runs")
    say("again on the next worker; its idempotency-key reservation is found 'sent', so the")
    say("provider is not called again.")
    workflow_id = "demo-notify"
    began = len(cluster.log_text())  # an earlier phase's worker may have exited too
    start_run(cluster, workflow_id, "--crash-after-notification")
    wait_for_approval_request(client, workflow_id)
    connected = len(cluster.worker_pids())
    approve(cluster, workflow_id, "ok")
    exited = f"the worker exited with {CRASH_EXIT_CODE}; starting it again"
    wait_until(lambda: exited in cluster.log_text()[began:], "the worker to exit after sending")
    crash = next(
        line for line in cluster.log_text().splitlines() if "crash_after_notification" in line
    )
    evidence(crash.split("examples.research_agent: ", 1)[-1])
    check(exited in cluster.log_text()[began:], f"perdure dev: {exited!r}")
    cluster.wait_worker(after=connected)
    described = check_completed(client, cluster, workflow_id)
    notify = next(step for step in described.steps if step.step_id == "notify")
    output = decode(notify.output)
    evidence(f"notify step output: {json.dumps(output)}")
    key = f"{workflow_id}:notify"
    check(
        reservation_state(key, cluster.database) == "sent"
        and output["delivery"].startswith("already sent"),
        f"the replay found reservation {key!r} 'sent' and sent nothing",
    )
    check(cluster.log_text()[began:].count(exited) == 1, "the replay did not crash again")


def frame_runs(frames: list[Frame]) -> str:
    """The frames as a reader got them, consecutive ones of one attempt on one line."""
    lines = []
    runs = itertools.groupby(frames, key=lambda f: (f.step_id, f.attempt, f.reset))
    for (step_id, attempt, reset), grouped in runs:
        group = list(grouped)
        first, last = group[0].seq, group[-1].seq
        seqs = str(first) if first == last else f"{first}-{last}"
        if reset:
            what = "RESET: the attempt failed, its text is dropped"
        else:
            text = "".join(str(frame.data) for frame in group).replace("\n", " ")
            shown = text if len(text) <= 60 else text[:57] + "..."
            what = f"{len(group)} tokens {json.dumps(shown)}"
        lines.append(f"frames {seqs:<8} {step_id} attempt {attempt}: {what}")
    return "\n".join(lines)


def phase_stream(cluster: LocalCluster, client: Client) -> None:
    """The worker dies while analyze streams its text; the reader sees a reset, then the
    retry's text, and ends with exactly what the steps returned."""
    say("analyze and report stream their text token by token (current_step().emit) while a")
    say("reader follows the run's output stream. With crash_mid_stream the worker exits after")
    say(
        f"{CRASH_AFTER_TOKENS} tokens of analyze's first attempt; the next worker retries the step,"
    )
    say("and the reader gets a reset frame for the dead attempt before the retry's tokens.")
    workflow_id = "demo-stream"
    began = len(cluster.log_text())
    frames: list[Frame] = []
    start_run(cluster, workflow_id, "--crash-mid-stream", "analyze")
    reader = threading.Thread(target=lambda: frames.extend(client.stream(workflow_id)))
    reader.daemon = True  # a failed phase leaves it behind; the demo's exit ends it
    reader.start()
    exited = f"the worker exited with {CRASH_EXIT_CODE}; starting it again"
    wait_until(lambda: exited in cluster.log_text()[began:], "the worker to exit mid-stream")
    crash = next(
        line for line in cluster.log_text()[began:].splitlines() if "crash_mid_stream" in line
    )
    evidence(crash.split("examples.research_agent: ", 1)[-1])
    check(exited in cluster.log_text()[began:], f"perdure dev: {exited!r}")
    wait_for_approval_request(client, workflow_id)
    approve(cluster, workflow_id, "ok")
    described = check_completed(client, cluster, workflow_id)
    reader.join(PHASE_TIMEOUT)
    check(not reader.is_alive(), "the reader's stream ended when the run closed")
    say(f"  $ python: list(client.stream({workflow_id!r}))")
    evidence(frame_runs(frames))
    check(
        [frame.seq for frame in frames] == list(range(1, len(frames) + 1)),
        f"the reader got frames 1 to {len(frames)}, each once, in order",
    )
    text = StreamText()
    for frame in frames:
        text.add(frame)
    check(
        [(reset.step_id, reset.attempt) for reset in text.resets] == [("analyze", 1)],
        "one reset: analyze's attempt 1, which died mid-stream",
    )
    outputs = {step.step_id: decode(step.output) for step in described.steps}
    attempts = {step.step_id: step.attempts for step in described.steps}
    check(
        text.step("analyze") == outputs["analyze"]["summary"] and attempts["analyze"] == 2,
        "the text rebuilt for analyze is its second attempt's result, nothing twice",
    )
    check(
        text.step("report") == outputs["report"]["body"],
        f"the text rebuilt for report is the report's body ({len(text.step('report'))} chars)",
    )


def replay_gate(cluster: LocalCluster, module: str, exit_code: int) -> str:
    """`perdure replay --module MODULE`: the open runs' journals against new code."""
    args = ["replay", "--module", module, "--open"]
    return run_command(
        cluster,
        ["-m", "perdure.cli", *args, "--address", cluster.address],
        "perdure " + shlex.join(args),
        exit_code=exit_code,
    )


def phase_deploy(cluster: LocalCluster, client: Client) -> None:
    """Release 2 adds a step before the analysis: the replay gate catches the breaking version
    against the run in flight, passes the patched one, and the deploy strands nothing."""
    say("A run of release 1 waits for its approval, past its analysis. Release 2 adds a")
    say("fact_check step before the analysis. Before deploying, `perdure replay` replays the")
    say("open runs' journals against the new code, running no step.")
    old_run, new_run = "demo-deploy-old", "demo-deploy-new"
    start_run(cluster, old_run)
    wait_for_approval_request(client, old_run)
    unsafe, patched = (
        "examples.research_agent.releases.unsafe",
        "examples.research_agent.releases.patched",
    )
    report = replay_gate(cluster, unsafe, exit_code=1)
    check(
        old_run in report and "NON-DETERMINISTIC" in report and "step 'fact_check'" in report,
        f"the gate refuses {unsafe}: {old_run} recorded another call where it calls fact_check",
    )
    say("The change goes behind ctx.patched('fact-check'): runs past that point keep")
    say("release 1's path, runs that get there on release 2 take the new one.")
    report = replay_gate(cluster, patched, exit_code=0)
    check("1 passed, 0 non-deterministic" in report, f"the gate passes {patched}")
    say("Deploy: perdure dev stops and starts again with release 2 as its worker's code.")
    cluster.stop()
    cluster.worker_module = patched
    cluster.start()
    with Client(cluster.address, api_key=cluster.api_key()) as deployed:
        approve(cluster, old_run, "approved on release 2")
        check_completed(deployed, cluster, old_run)
        start_run(cluster, new_run)
        wait_for_approval_request(deployed, new_run)
        approve(cluster, new_run, "approved")
        described = wait_closed(deployed, new_run)
        evidence(step_table(described))
        steps = completed_steps(deployed, new_run)
        check(
            described.workflow.status == wf.WORKFLOW_STATUS_COMPLETED
            and steps == [*STEPS[:3], "fact_check", *STEPS[3:]],
            f"{new_run} completed with fact_check before analyze: {', '.join(steps)}",
        )


# -- the walk-through -----------------------------------------------------------------------------


@dataclass
class Outcome:
    """A phase's verdict."""

    title: str
    passed: bool
    detail: str = ""
    seconds: float = 0.0


def phase_budget(cluster: LocalCluster, client: Client) -> None:
    """A run under a token budget: each model call reserves its estimate before it is granted,
    settles at what it used, and the call that does not fit stops the run."""
    say("With model_tokens, each model call is a step that declares an estimate (400 tokens)")
    say("and reports what it used (the model's usage). The scheduler reserves the estimate")
    say("against the run's budget (600 tokens) before granting the call, and settles it at")
    say("the report. The run chose to fail when a call does not fit, rather than wait.")
    workflow_id = "demo-budget"
    client.start_workflow(
        "research_agent",
        {"topic": "durable agents", "model_tokens": 400},
        workflow_id=workflow_id,
        budget=Budget(units=600),
        on_budget_exceeded="fail",
    )
    described = wait_closed(client, workflow_id)
    evidence(step_table(described))
    check(
        described.workflow.status == wf.WORKFLOW_STATUS_FAILED,
        f"{workflow_id} is {status_name(described.workflow.status)}",
    )
    refused = [s for s in described.steps if s.failure.type == "BudgetExceeded"]
    check(
        len(refused) == 1,
        f"one model call refused, with BudgetExceeded: {[s.failure.message for s in refused]}",
    )
    state = published(described)
    check(state.get("phase") == "out_of_budget", f"phase = {state.get('phase')!r}")
    run_command(
        cluster,
        [
            *("-m", "perdure.cli", "budgets", "--address", cluster.address),
            *("--workflow-id", workflow_id),
        ],
        f"perdure budgets --workflow-id {workflow_id}",
    )
    flow = described.flow
    check(
        flow.spent.units + flow.reserved.units <= 600 and flow.refusals == 1,
        f"spent {flow.spent.units} of 600 tokens, {flow.reserved.units} reserved, "
        f"{flow.spent.cost_micros} micros at the model's prices: never more than the budget",
    )
    running = f"research_agent {workflow_id}: running step {refused[0].step_id} "
    ran = cluster.log_text().count(f"research_agent {workflow_id}: running step")
    check(
        running not in cluster.log_text(),
        f"the refused call, {refused[0].step_id}, never ran ({ran} model calls before it did)",
    )


def phase_toolkit(cluster: LocalCluster, client: Client) -> None:
    """The purchasing agent: children, an escalated approval decided with perdure approve, a
    saga that compensates, an approval that expires, all under the run's token budget."""
    say("The purchasing agent plans with a model call, asks each vendor for a quote in a child")
    say("workflow of its own, asks for an approval (escalated to an admin after 2 s, expiring")
    say("after 10 minutes) and buys in a saga: hold the funds, place the order, book delivery.")
    budget = Budget(units=3_000)
    client.start_workflow(
        "purchasing_agent",
        {"item": "a GPU server", "escalate_after": 2, "approval_timeout": 600},
        workflow_id="demo-purchase",
        budget=budget,
        on_budget_exceeded="fail",
    )
    children = wait_until(
        lambda: client.list(parent_workflow_id="demo-purchase").workflows,
        "the vendors' child runs",
    )
    wait_until(
        lambda: published(client.describe("demo-purchase")).get("phase") == "escalated",
        "the approval to escalate",
    )
    run_command(
        cluster,
        [*("-m", "perdure.cli", "approvals", "--address", cluster.address, "list")],
        "perdure approvals list",
    )
    approve(cluster, "demo-purchase", "the cheapest quote, within plan")
    described = wait_closed(client, "demo-purchase")
    result = published_result(described)
    evidence(step_table(described))
    check(result.get("status") == "purchased", f"demo-purchase: {result.get('status')!r}")
    children = client.list(parent_workflow_id="demo-purchase").workflows
    check(
        len(children) == 3 and all(c.status == wf.WORKFLOW_STATUS_COMPLETED for c in children),
        f"3 child runs, linked to their parent: {[c.workflow_id for c in children]}",
    )
    calls = [s for s in described.steps if s.usage.model]
    check(
        described.flow.spent.units == sum(s.usage.usage.units for s in calls) <= 3_000,
        f"{len(calls)} model calls journaled their tokens; the run spent "
        f"{described.flow.spent.units} of {budget.units} tokens",
    )

    say("The same purchase when no carrier can deliver: the saga undoes it, last first.")
    client.start_workflow(
        "purchasing_agent", {"fail_delivery": True}, workflow_id="demo-compensate"
    )
    wait_until(
        lambda: published(client.describe("demo-compensate")).get("phase") == "awaiting_approval",
        "the second run's approval",
    )
    approve(cluster, "demo-compensate", "go")
    compensated = wait_closed(client, "demo-compensate")
    steps = [s.step_id for s in compensated.steps if s.usage.model == ""]
    evidence(step_table(compensated))
    check(
        published_result(compensated).get("status") == "compensated"
        and steps[-2:] == ["cancel_order", "release_funds"],
        f"compensated: {steps}",
    )

    say("An approval nobody decides expires: the run is told, never early, and buys nothing.")
    client.start_workflow(
        "purchasing_agent",
        {"escalate_after": 1, "approval_timeout": 3},
        workflow_id="demo-expire",
    )
    expired = wait_closed(client, "demo-expire")
    check(
        published_result(expired).get("status") == "expired",
        f"demo-expire: {published_result(expired).get('expired')}",
    )


PHASES: list[tuple[str, Callable[[LocalCluster, Client], Any]]] = [
    ("approval: wait as state, approve, complete", phase_approval),
    ("kill -9 the worker during a slow step", phase_kill),
    ("a failing step retried on a durable schedule", phase_retry),
    ("stop everything while waiting, start again, approve", phase_restart),
    ("crash right after the notification: sent once", phase_notify),
    ("kill the worker mid-stream: a reset, then the retry's text", phase_stream),
    ("a breaking deploy caught by the replay gate, then made safe", phase_deploy),
    ("a token budget stops a run: reserved before each model call", phase_budget),
    ("an agent delegates, escalates, compensates, expires, in budget", phase_toolkit),
]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo; 0 when every phase passed."""
    parser = argparse.ArgumentParser(prog="python -m examples.research_agent.demo")
    parser.add_argument("--keep", action="store_true", help="keep the data directory and logs")
    args = parser.parse_args(argv)
    # SIGTERM ends the demo through its `finally`, which stops what it started.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    began = time.monotonic()
    # A short path: PostgreSQL's Unix socket lives in it and socket paths are limited.
    cluster = LocalCluster(Path(tempfile.mkdtemp(prefix="pdemo")))
    outcomes: list[Outcome] = []
    say("Perdure demo: the research agent")
    say("create_plan -> research_1 -> research_2 -> analyze -> recommend -> approval -> report")
    say("-> notify, on a fresh local cluster in " + str(cluster.data_dir))
    say()
    try:
        say("== Starting the local cluster ==")
        try:
            cluster.start()
        except (DemoError, OSError) as error:
            say(f"  [FAIL] the cluster did not start: {error}")
            outcomes = [Outcome(title, False, "the cluster did not start") for title, _ in PHASES]
        else:
            for number, (title, phase) in enumerate(PHASES, 1):
                outcomes.append(_run_phase(number, title, phase, cluster))
    except KeyboardInterrupt:
        say("\n  interrupted")
        outcomes.append(Outcome("interrupted", False))
    finally:
        say()
        say("== Stopping everything the demo started ==")
        forced = cluster.stop()
        evidence("; ".join(forced) if forced else "perdure dev stopped its processes itself")
    say()
    say("== Summary ==")
    for number, outcome in enumerate(outcomes, 1):
        verdict = "PASS" if outcome.passed else "FAIL"
        detail = f" -- {outcome.detail}" if outcome.detail else ""
        say(f"  {verdict}  phase {number}: {outcome.title} ({outcome.seconds:.1f}s){detail}")
    passed = bool(outcomes) and all(outcome.passed for outcome in outcomes)
    say(f"  {'PASS' if passed else 'FAIL'}  all phases, in {time.monotonic() - began:.0f}s")
    if passed and not args.keep:
        shutil.rmtree(cluster.data_dir, ignore_errors=True)
    else:
        say(f"  logs and data kept in {cluster.data_dir}")
    return 0 if passed else 1


def _run_phase(
    number: int,
    title: str,
    phase: Callable[[LocalCluster, Client], Any],
    cluster: LocalCluster,
) -> Outcome:
    say()
    say(f"== Phase {number}/{len(PHASES)}: {title} ==")
    began = time.monotonic()
    try:
        if not cluster.running():
            say("  (perdure dev is not running: starting it again)")
            cluster.start()
        with Client(cluster.address, api_key=cluster.api_key()) as client:
            phase(cluster, client)
    except Exception as error:  # a failed phase is reported; the next one still runs
        say(f"  [FAIL] {type(error).__name__}: {error}")
        if cluster.logs:
            evidence("last lines of the cluster's log:")
            evidence("\n".join(cluster.log_text().splitlines()[-25:]))
        return Outcome(title, False, str(error).splitlines()[0], time.monotonic() - began)
    say(f"  PASS ({time.monotonic() - began:.1f}s)")
    return Outcome(title, True, "", time.monotonic() - began)


if __name__ == "__main__":
    sys.exit(main())
