"""Approvals as records, end to end (real services, real workers): a run's ctx.approval creates
an approval that ApprovalService lists across runs and decides once; a decision names the hash
of the details its decider saw; expiry and escalation happen on the database clock; who may
decide is the approval's approvers (and, once escalated, its escalate_to); no signal can forge
a decision; `perdure approve` decides from the command line."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import grpc
import pytest

from perdure.api.admin.v1 import admin_service_pb2 as admin
from perdure.api.admin.v1 import admin_service_pb2_grpc as admingrpc
from perdure.api.worker.v1 import journal_service_pb2 as jpb
from perdure.api.worker.v1 import journal_service_pb2_grpc as jgrpc
from perdure.api.workflow.v1 import approval_service_pb2 as apb
from perdure.api.workflow.v1 import approval_service_pb2_grpc as agrpc
from perdure.api.workflow.v1 import workflow_pb2 as wf
from perdure.client import Client
from perdure.common.reasons import Reason
from perdure.worker._payload import from_payload, to_payload
from tests.chaos.proxy import Fault, Proxy
from tests.fixtures.cluster import REPO_ROOT, Cluster, wait_until
from tests.fixtures.keys import make_key
from tests.fixtures.postgres import Databases

MODULE = "tests.e2e.approval_workflows"
WAIT = 60.0
DETAILS = {"release": "v2", "services": ["api", "web"]}


@pytest.fixture(scope="module")
def approvals_cluster(
    databases: Databases, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """Keys off: anyone may decide, naming themselves."""
    with databases.fresh() as dsn:
        cluster = Cluster(dsn, tmp_path_factory.mktemp("approvals"))
        try:
            cluster.start_services()
            cluster.start_worker("w", module=MODULE)
            yield cluster
        finally:
            cluster.stop()


@pytest.fixture
def client(approvals_cluster: Cluster) -> Iterator[Client]:
    with approvals_cluster.client() as connected:
        yield connected


@pytest.fixture
def approvals(approvals_cluster: Cluster) -> Iterator[agrpc.ApprovalServiceStub]:
    with grpc.insecure_channel(approvals_cluster.gateway) as channel:
        yield agrpc.ApprovalServiceStub(channel)


Metadata = tuple[tuple[str, str], ...]


def pending_of(
    stub: agrpc.ApprovalServiceStub, workflow_id: str, metadata: Metadata = ()
) -> wf.Approval:
    """The run's one pending approval, once its code has asked for it."""
    found: list[wf.Approval] = []

    def asked() -> bool:
        listed = stub.ListApprovals(
            apb.ListApprovalsRequest(workflow_id=workflow_id, status=wf.APPROVAL_STATUS_PENDING),
            timeout=10,
            metadata=metadata,
        )
        found[:] = listed.approvals
        return len(found) == 1

    wait_until(asked, WAIT, f"{workflow_id}'s approval")
    return found[0]


def decide(
    stub: agrpc.ApprovalServiceStub,
    approval: wf.Approval,
    approve: bool = True,
    *,
    sha256: str | None = None,
    metadata: Metadata = (),
    **fields: Any,
) -> wf.Approval:
    request = apb.DecideApprovalRequest(
        approval_id=approval.approval_id,
        approve=approve,
        details_sha256=approval.details_sha256 if sha256 is None else sha256,
        **fields,
    )
    decided: wf.Approval = stub.DecideApproval(request, timeout=10, metadata=metadata).approval
    return decided


def refusal(call: Any) -> tuple[grpc.StatusCode, str, str]:
    """The status, ErrorInfo reason and message of a call that must fail."""
    from perdure.client._errors import reason_of

    with pytest.raises(grpc.RpcError) as raised:
        call()
    error = raised.value
    return error.code(), reason_of(error), error.details() or ""


def events_of(client: Client, workflow_id: str, event_type: int) -> list[wf.HistoryEvent]:
    return [e for e in client.history(workflow_id) if e.event_type == event_type]


def test_a_decision_is_recorded_audited_single_use_and_checks_the_details_hash(
    client: Client, approvals: agrpc.ApprovalServiceStub, approvals_cluster: Cluster
) -> None:
    client.start("ask", {"details": DETAILS, "timeout": 300}, workflow_id="decided")
    approval = pending_of(approvals, "decided")
    assert approval.name == "deploy" and from_payload(approval.details) == DETAILS
    assert approval.details_sha256 == hashlib.sha256(approval.details.data).hexdigest()
    assert approval.expire_time.ToDatetime() > approval.create_time.ToDatetime()
    # Details other than those the decider saw: refused, nothing decided.
    seen = hashlib.sha256(json.dumps({"release": "v1"}).encode()).hexdigest()
    code, reason, message = refusal(lambda: decide(approvals, approval, sha256=seen))
    assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, Reason.APPROVAL_DETAILS_CHANGED)
    assert "details changed" in message
    decided = decide(approvals, approval, decided_by="alice", reason="looks right")
    assert decided.status == wf.APPROVAL_STATUS_APPROVED
    assert (decided.decided_by, decided.reason) == ("alice", "looks right")
    result = client.result("decided", timeout=WAIT)
    assert result["approved"] is True and result["decided_by"] == "alice"
    assert result["reason"] == "looks right" and result["approval_id"] == approval.approval_id
    assert datetime.fromisoformat(result["decided_at"]) == decided.decide_time.ToDatetime(
        tzinfo=datetime.fromisoformat(result["decided_at"]).tzinfo
    )
    # Single use: a second decision, either way, is refused.
    code, reason, _ = refusal(lambda: decide(approvals, approval, approve=False))
    assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, Reason.APPROVAL_DECIDED)
    again = approvals.GetApproval(
        apb.GetApprovalRequest(approval_id=approval.approval_id), timeout=10
    ).approval
    assert again.status == wf.APPROVAL_STATUS_APPROVED and again.decided_by == "alice"
    (event,) = events_of(client, "decided", wf.EVENT_TYPE_APPROVAL_DECIDED)
    assert event.approval_id == approval.approval_id and event.fence == 0
    # Audited, with who and why.
    with grpc.insecure_channel(approvals_cluster.gateway) as channel:
        audit = admingrpc.AdminServiceStub(channel).ListAuditEvents(
            admin.ListAuditEventsRequest(), timeout=10
        )
    (entry,) = [e for e in audit.events if e.action == "APPROVAL_APPROVED"]
    assert entry.target == "decided"
    assert entry.details["approval_id"] == approval.approval_id
    assert entry.details["reason"] == "looks right"


def test_an_approval_expires_on_time_never_early_and_refuses_a_late_decision(
    client: Client, approvals: agrpc.ApprovalServiceStub
) -> None:
    client.start("ask", {"details": DETAILS, "timeout": 3}, workflow_id="expiring")
    approval = pending_of(approvals, "expiring")
    result = client.result("expiring", timeout=WAIT)
    assert result["expired"] is True and result["approval_id"] == approval.approval_id
    expires_at = approval.expire_time.ToDatetime().replace(tzinfo=None)
    for moment in ("expired_at", "went_on_at"):
        observed = datetime.fromisoformat(result[moment]).replace(tzinfo=None)
        assert observed >= expires_at, (moment, observed, expires_at)
    assert datetime.fromisoformat(result["expires_at"]).replace(tzinfo=None) == expires_at
    code, reason, _ = refusal(lambda: decide(approvals, approval))
    assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, Reason.APPROVAL_EXPIRED)
    got = approvals.GetApproval(
        apb.GetApprovalRequest(approval_id=approval.approval_id), timeout=10
    ).approval
    assert got.status == wf.APPROVAL_STATUS_EXPIRED and not got.decided_by
    assert len(events_of(client, "expiring", wf.EVENT_TYPE_APPROVAL_EXPIRED)) == 1


def test_a_signal_cannot_forge_a_decision(
    client: Client, approvals: agrpc.ApprovalServiceStub
) -> None:
    client.start("ask", {"details": DETAILS, "timeout": 300}, workflow_id="forged")
    approval = pending_of(approvals, "forged")
    forged = {"approved": True, "approval_id": approval.approval_id, "decided_by": "mallory"}
    client.signal("forged", "approval", forged)
    client.signal("forged", "deploy", forged)

    def woken_and_waiting_again() -> bool:
        events = list(client.history("forged"))
        signals = [e.event_id for e in events if e.event_type == wf.EVENT_TYPE_SIGNAL_RECEIVED]
        suspended = [e.event_id for e in events if e.event_type == wf.EVENT_TYPE_WORKFLOW_SUSPENDED]
        return len(signals) == 2 and bool(suspended) and suspended[-1] > signals[-1]

    wait_until(woken_and_waiting_again, WAIT, "the run to wake and wait again")
    described = client.describe("forged")
    assert described.workflow.status == wf.WORKFLOW_STATUS_WAITING
    assert described.workflow.wait.kind == wf.WAIT_KIND_APPROVAL
    assert [a.approval_id for a in described.pending_approvals] == [approval.approval_id]
    assert not events_of(client, "forged", wf.EVENT_TYPE_APPROVAL_DECIDED)
    decide(approvals, approval, approve=False, reason="no")
    assert client.result("forged", timeout=WAIT)["approved"] is False


def test_approvals_are_listed_across_runs(
    client: Client, approvals: agrpc.ApprovalServiceStub
) -> None:
    ids = [f"listed-{n}" for n in range(3)]
    for workflow_id in ids:
        client.start(
            "ask", {"details": {"n": workflow_id}, "timeout": 300}, workflow_id=workflow_id
        )
    asked = {workflow_id: pending_of(approvals, workflow_id) for workflow_id in ids}
    pending = approvals.ListApprovals(
        apb.ListApprovalsRequest(status=wf.APPROVAL_STATUS_PENDING), timeout=10
    ).approvals
    assert {a.workflow_id for a in pending} >= set(ids)
    seen: list[str] = []
    token = ""
    while True:
        page = approvals.ListApprovals(
            apb.ListApprovalsRequest(page_size=2, page_token=token), timeout=10
        )
        assert len(page.approvals) <= 2
        seen += [a.approval_id for a in page.approvals]
        token = page.next_page_token
        if not token:
            break
    assert {a.approval_id for a in asked.values()} <= set(seen)
    assert len(seen) == len(set(seen))
    for approval in asked.values():
        decide(approvals, approval)
    for workflow_id in ids:
        assert client.result(workflow_id, timeout=WAIT)["approved"] is True
    decided = approvals.ListApprovals(
        apb.ListApprovalsRequest(status=wf.APPROVAL_STATUS_APPROVED), timeout=10
    ).approvals
    assert {a.workflow_id for a in decided} >= set(ids)


def perdure_cli(cluster: Cluster, group: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`perdure <group> --address <gateway> <args>`."""
    return subprocess.run(
        [sys.executable, "-m", "perdure.cli", group, "--address", cluster.gateway, *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_perdure_approve_decides_a_runs_pending_approval(
    client: Client, approvals: agrpc.ApprovalServiceStub, approvals_cluster: Cluster
) -> None:
    nothing = perdure_cli(approvals_cluster, "approve", "no-such-run")
    assert nothing.returncode != 0 and "no pending approval" in nothing.stderr
    client.start("ask", {"details": DETAILS, "timeout": 300}, workflow_id="by-cli")
    approval = pending_of(approvals, "by-cli")
    listed = perdure_cli(approvals_cluster, "approvals", "list", "--status", "pending")
    assert listed.returncode == 0, listed.stderr
    assert approval.approval_id in listed.stdout
    shown = perdure_cli(approvals_cluster, "approvals", "show", approval.approval_id)
    assert shown.returncode == 0 and approval.details_sha256 in shown.stdout
    done = perdure_cli(approvals_cluster, "approve", "by-cli", "--reason", "ship it")
    assert done.returncode == 0, done.stderr
    result = client.result("by-cli", timeout=WAIT)
    assert result["approved"] is True and result["reason"] == "ship it"
    assert result["decided_by"]  # the CLI names its user
    again = perdure_cli(approvals_cluster, "approve", approval.approval_id)
    assert again.returncode != 0 and "APPROVAL_DECIDED" in again.stderr


def key_id_of(token: str) -> str:
    return token.removeprefix("prd_").partition("_")[0]


def named_key(cluster: Cluster, namespace: str, role: str, name: str) -> str:
    """`perdure keys create --name NAME --database-url`: a key with a label; its token."""
    done = subprocess.run(
        [
            *(sys.executable, "-m", "perdure.cli", "keys", "create"),
            *("--namespace", namespace, "--role", role, "--name", name),
            *("--database-url", cluster.dsn),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_only_approvers_decide_and_escalation_admits_escalate_to(
    start_cluster: Any,
) -> None:
    cluster = start_cluster(PERDURE_AUTH="on")
    cluster.start_worker(
        "w", module=MODULE, PERDURE_API_KEY=make_key(cluster, "ops", "worker", "*")
    )
    approver, bystander = (make_key(cluster, "ops", "reader") for _ in range(2))
    backup = named_key(cluster, "ops", "reader", "release-manager")  # named in escalate_to
    operator = make_key(cluster, "ops", "operator")

    def as_key(token: str) -> Metadata:
        return (("authorization", f"Bearer {token}"),)

    with (
        grpc.insecure_channel(cluster.gateway) as channel,
        Client(cluster.gateway, api_key=operator) as client,
    ):
        stub = agrpc.ApprovalServiceStub(channel)
        args = {
            "details": DETAILS,
            "timeout": 300,
            "escalate_after": 2,
            "approvers": [key_id_of(approver)],
            "escalate_to": ["release-manager"],
        }
        client.start("ask", args, workflow_id="escalating")
        approval = pending_of(stub, "escalating", as_key(bystander))
        assert list(approval.approvers) == [key_id_of(approver)]
        for token in (bystander, backup, operator):  # not approvers (yet)
            code, reason, message = refusal(
                lambda token=token: decide(stub, approval, metadata=as_key(token))
            )
            assert (code, reason) == (grpc.StatusCode.PERMISSION_DENIED, Reason.PERMISSION_DENIED)
            assert key_id_of(token) in message

        def escalated() -> bool:
            got = stub.GetApproval(
                apb.GetApprovalRequest(approval_id=approval.approval_id),
                timeout=10,
                metadata=as_key(bystander),
            ).approval
            return bool(got.HasField("escalated_time"))

        wait_until(escalated, WAIT, "the approval to escalate")
        assert len(events_of(client, "escalating", wf.EVENT_TYPE_APPROVAL_ESCALATED)) == 1
        wait_until(lambda: "escalated" in client.describe("escalating").state, WAIT, "the callback")
        told = from_payload(client.describe("escalating").state["escalated"])
        assert told == {"approval_id": approval.approval_id, "escalate_to": ["release-manager"]}
        code, _, _ = refusal(lambda: decide(stub, approval, metadata=as_key(bystander)))
        assert code == grpc.StatusCode.PERMISSION_DENIED
        decided = decide(stub, approval, metadata=as_key(backup), reason="covering")
        assert decided.decided_by == key_id_of(backup)
        result = client.result("escalating", timeout=WAIT)
        assert result["escalated"] is True and result["decided_by"] == key_id_of(backup)


def test_a_request_sent_again_finds_the_first_and_bad_requests_are_refused(
    client: Client, approvals_cluster: Cluster
) -> None:
    """RequestApproval spoken directly, as a worker in another language would."""
    approvals_cluster.start_worker("registrar", module=MODULE, task_queue="by-hand").kill()
    args = {"details": DETAILS, "timeout": 300}
    client.start("ask", args, workflow_id="raw", task_queue="by-hand")
    with grpc.insecure_channel(approvals_cluster.address("history")) as channel:
        journal = jgrpc.JournalServiceStub(channel)
        journal.LoadJournal(jpb.LoadJournalRequest(workflow_id="raw", fence=5), timeout=30)

        def request(**fields: Any) -> jpb.RequestApprovalRequest:
            call: dict[str, Any] = {
                "workflow_id": "raw",
                "fence": 5,
                "step_id": "$approval:ship",
                "step_name": "$approval:ship",
                "position": 0,
                "name": "ship",
                "details": to_payload({"v": 1}),
            }
            asked = jpb.RequestApprovalRequest(**(call | fields))
            if not asked.HasField("timeout"):
                asked.timeout.FromSeconds(60)
            return asked

        first = journal.RequestApproval(request(), timeout=30)
        again = journal.RequestApproval(request(), timeout=30)  # its answer lost, say
        assert first.approval_id.startswith("apr-") and first.event_id > 0
        assert (again.approval_id, again.event_id) == (first.approval_id, first.event_id)
        assert again.expire_time == first.expire_time and not first.HasField("escalate_time")
        other = request(details=to_payload({"v": 2}))
        code, reason, _ = refusal(lambda: journal.RequestApproval(other, timeout=30))
        assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, Reason.STEP_CONFLICT)
        late = request(position=1, step_id="$approval:ship#2")
        late.escalate_after.FromSeconds(60)  # not before its expiry
        no_prefix = request(position=1, step_id="ship", step_name="ship")
        for bad in (late, no_prefix):
            code, _, message = refusal(lambda bad=bad: journal.RequestApproval(bad, timeout=30))
            assert code == grpc.StatusCode.INVALID_ARGUMENT, message
        # Details past the payload limit (2 MiB): refused whole, saying so; no record, no event.
        oversized = request(
            position=1, step_id="$approval:ship#2", details=to_payload("x" * 3_000_000)
        )
        code, _, message = refusal(lambda: journal.RequestApproval(oversized, timeout=30))
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "details is 3000002 bytes; the limit is 2097152 bytes" in message
    with grpc.insecure_channel(approvals_cluster.gateway) as channel:
        stub = agrpc.ApprovalServiceStub(channel)
        rows = stub.ListApprovals(apb.ListApprovalsRequest(workflow_id="raw"), timeout=10)
    assert [a.approval_id for a in rows.approvals] == [first.approval_id]


def test_the_node_sdk_asks_escalates_and_takes_the_decision(
    start_cluster: Any, tmp_path: Any
) -> None:
    cluster = start_cluster()
    cluster.start_node_worker("node-1", "node", tmp_path / "ledger")
    with cluster.client() as client, grpc.insecure_channel(cluster.gateway) as channel:
        stub = agrpc.ApprovalServiceStub(channel)
        args = {"details": DETAILS, "timeout": 300, "escalate_after": 1, "escalate_to": ["admin"]}
        client.start("node_ask", args, workflow_id="node-asks", task_queue="node")
        approval = pending_of(stub, "node-asks")
        assert from_payload(approval.details) == DETAILS
        wait_until(lambda: "escalated" in client.describe("node-asks").state, WAIT, "the callback")
        told = from_payload(client.describe("node-asks").state["escalated"])
        assert told == {"approval_id": approval.approval_id, "escalate_to": ["admin"]}
        decide(stub, approval, decided_by="nora", reason="from node")
        result = client.result("node-asks", timeout=WAIT)
    assert (result["approved"], result["decided_by"], result["reason"]) == (
        True,
        "nora",
        "from node",
    )
    assert result["escalated"] is True and result["approval_id"] == approval.approval_id


def test_the_pending_approval_of_a_run_that_closes_expires(
    client: Client, approvals: agrpc.ApprovalServiceStub
) -> None:
    client.start("ask", {"details": DETAILS, "timeout": 300}, workflow_id="cancelled")
    approval = pending_of(approvals, "cancelled")
    client.cancel("cancelled", reason="not needed")
    wait_until(
        lambda: client.describe("cancelled").workflow.status == wf.WORKFLOW_STATUS_CANCELLED,
        WAIT,
        "the run to end cancelled",
    )

    def expired() -> bool:
        got = approvals.GetApproval(
            apb.GetApprovalRequest(approval_id=approval.approval_id), timeout=10
        ).approval
        return bool(got.status == wf.APPROVAL_STATUS_EXPIRED)

    wait_until(expired, WAIT, "the closed run's approval to expire")
    code, reason, _ = refusal(lambda: decide(approvals, approval))
    assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, Reason.APPROVAL_EXPIRED)


def test_details_past_the_payload_limit_fail_the_run_with_the_limit_and_record_nothing(
    client: Client, approvals: agrpc.ApprovalServiceStub
) -> None:
    """ctx.approval with details of 3 MB: the request is refused whole, the code gets the error
    naming the limit (uncaught, it fails the run), and no approval is recorded."""
    client.start("ask", {"details_size": 3_000_000, "timeout": 300}, workflow_id="too-big")
    described = client.wait("too-big", timeout=WAIT)
    assert described.workflow.status == wf.WORKFLOW_STATUS_FAILED
    failure = described.workflow.failure
    assert failure.type == "JournalRejectedError"
    assert "details is 3000011 bytes; the limit is 2097152 bytes" in failure.message
    listed = approvals.ListApprovals(apb.ListApprovalsRequest(workflow_id="too-big"), timeout=10)
    assert list(listed.approvals) == []


def test_approvals_are_asked_once_through_a_link_to_history_that_loses_replies(
    approvals_cluster: Cluster, client: Client, approvals: agrpc.ApprovalServiceStub
) -> None:
    """A worker reaching history through a proxy that cuts a connection instead of passing a
    reply one time in five: each of five runs has one approval record and one
    APPROVAL_REQUESTED event, and takes its decision."""
    proxy = Proxy(seed=11)
    ids = [f"lossy-{n}" for n in range(5)]
    try:
        link = proxy.link("worker", "history", ("127.0.0.1", approvals_cluster.ports["history"]))
        approvals_cluster.start_worker(
            "lossy", MODULE, task_queue="lossy", PERDURE_HISTORY_ADDRESS=f"127.0.0.1:{link.port}"
        )
        proxy.apply([link], Fault(lose_replies=0.2))
        for workflow_id in ids:
            client.start(
                "ask",
                {"details": DETAILS, "timeout": 300},
                workflow_id=workflow_id,
                task_queue="lossy",
            )
        pending = [pending_of(approvals, workflow_id) for workflow_id in ids]
        assert link.lost_replies > 0
        proxy.heal()
        for approval in pending:
            decide(approvals, approval, decided_by="ops")
        for workflow_id in ids:
            assert client.result(workflow_id, timeout=WAIT)["approved"] is True
            asked = events_of(client, workflow_id, wf.EVENT_TYPE_APPROVAL_REQUESTED)
            assert len(asked) == 1
            listed = approvals.ListApprovals(
                apb.ListApprovalsRequest(workflow_id=workflow_id), timeout=10
            )
            assert len(listed.approvals) == 1
    finally:
        proxy.close()
