"""The web UI in a real (headless) browser against a real cluster running the research agent:
start a run from the form and approve it, an approval sent again applied once, a step retried
with its live countdown, the text a step streams and the reset when its worker dies mid-stream,
cancel and terminate, the API's errors shown where they happen, the
list's filters and self-refresh, the live feed resuming after the gateway restarts, and API
keys (from the link's fragment only, never switched behind the user's back). Every page runs
under the gateway's Content-Security-Policy: a violation fails the test.

Each test leaves a screenshot of its last state in test-artifacts/screenshots/<test>.png.
PERDURE_UPDATE_UI_SCREENSHOT=1 also rewrites docs/images/workflow-page.png."""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import requests

from examples.research_agent import STEPS
from examples.research_agent.model import OfflineModel, tokens
from examples.research_agent.workflow import CRASH_AFTER_TOKENS, CRASH_EXIT_CODE
from tests.fixtures.approvals import decide_pending
from tests.fixtures.browser import TIMEOUT_MS, VIEWPORT, chromium, screenshot
from tests.fixtures.cluster import REPO_ROOT, Cluster, wait_until
from tests.fixtures.keys import make_key

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Locator, Page, Route

BEFORE_APPROVAL = list(STEPS[:5])
SLOW_SECONDS = 6  # long enough to act while a step runs, on a loaded machine too
DOCS_SCREENSHOT = REPO_ROOT / "docs" / "images" / "workflow-page.png"
# Records every text a retry countdown showed, with its step's status and error, so that a
# state that lasts a second is seen however the test's polling falls.
RECORD_RETRY_TEXTS = """
window.__retryTexts = [];
new MutationObserver(() => {
  for (const el of document.querySelectorAll('[data-testid="step-retry"]')) {
    const item = el.closest("[data-step-id]");
    const seen = {
      step: item?.dataset.stepId ?? "",
      status: item?.querySelector('[data-testid="step-status"]')?.textContent ?? "",
      text: el.textContent,
      failure: item?.querySelector('[data-testid="step-failure"]')?.textContent ?? "",
    };
    const last = window.__retryTexts[window.__retryTexts.length - 1];
    if (JSON.stringify(last) !== JSON.stringify(seen)) window.__retryTexts.push(seen);
  }
}).observe(document, {subtree: true, childList: true, characterData: true});
"""


# -- fixtures -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One headless Chromium for the module (each test gets a fresh context)."""
    with chromium() as running:
        from playwright.sync_api import expect

        expect.set_options(timeout=TIMEOUT_MS)
        yield running


@pytest.fixture
def page(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A fresh tab on a laptop-sized screen; its last state is saved as a screenshot, and a
    JavaScript error or a Content-Security-Policy violation anywhere fails the test."""
    context = browser.new_context(viewport=VIEWPORT, color_scheme="light")
    tab = context.new_page()
    tab.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    tab.on(
        "console",
        lambda message: (
            errors.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )
    try:
        yield tab
        # (a failed test gets its screenshot too: the teardown runs either way)
    finally:
        try:
            screenshot(tab, request.node.name)
        finally:
            context.close()
    assert not errors, f"JavaScript errors in the page: {errors}"


@pytest.fixture
def agent(start_cluster: Callable[..., Cluster], tmp_path: Path) -> Cluster:
    """A cluster with one worker serving the research agent."""
    running = start_cluster(PERDURE_EXAMPLE_DB=str(tmp_path / "research_agent.sqlite3"))
    running.start_worker("agent-1", module="examples.research_agent")
    return running


# -- helpers --------------------------------------------------------------------------------------


def expect(target: Any) -> Any:
    """Playwright's auto-waiting assertions (imported late: Playwright may be missing)."""
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(target)


def api(cluster: Cluster, method: str, path: str, key: str = "", **kwargs: Any) -> Any:
    """A call to the HTTP API beside the UI (to set up or check what the UI shows)."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    answer = requests.request(
        method, f"http://{cluster.http_address}{path}", headers=headers, timeout=30, **kwargs
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def open_ui(page: Page, cluster: Cluster, fragment: str = "#/") -> None:
    page.goto(f"http://{cluster.http_address}/{fragment}")


def nav(page: Page, name: str) -> None:
    """Follow a link of the header's main navigation."""
    page.get_by_role("navigation", name="Main").get_by_role("link", name=name).click()


def start_research(
    page: Page,
    workflow_id: str,
    topic: str,
    fail_step_once: str = "",
    slow_step: str = "",
    crash_mid_stream: str = "",
) -> None:
    """Fill the research agent's form, start, and land on the run's page."""
    nav(page, "Start a workflow")
    form = page.get_by_test_id("research-form")
    form.get_by_label("Topic").fill(topic)
    form.get_by_label("Workflow ID (optional)").fill(workflow_id)
    if fail_step_once:
        form.get_by_label("Fail one step once").select_option(fail_step_once)
    if crash_mid_stream:
        form.get_by_label("Crash the worker mid-stream").select_option(crash_mid_stream)
    if slow_step:
        form.get_by_label("Slow step", exact=True).select_option(slow_step)
        form.get_by_label("Slow step sleeps (seconds)").fill(str(SLOW_SECONDS))
    form.get_by_role("button", name="Start research run").click()
    expect(page).to_have_url(re.compile(rf"#/workflows/{re.escape(workflow_id)}$"))
    expect(page.get_by_test_id("workflow-id")).to_have_text(workflow_id)


def analysis_summary(topic: str) -> str:
    """The text the research agent's analyze step streams for `topic` (the model is
    deterministic)."""
    model = OfflineModel()
    plan = model.plan(topic)
    notes = [model.research(topic, question) for question in plan["questions"]]
    return str(model.analyze(topic, notes)["summary"])


def stream_panel(page: Page, step_id: str) -> Locator:
    return page.get_by_test_id(f"stream-{step_id}")


def step(page: Page, step_id: str) -> Locator:
    return page.get_by_test_id(f"step-{step_id}")


def expect_step(page: Page, step_id: str, status: str, attempts: int | None = None) -> None:
    item = step(page, step_id)
    expect(item.get_by_test_id("step-status")).to_have_text(status)
    if attempts is not None:
        plural = "attempt" if attempts == 1 else "attempts"
        expect(item.get_by_test_id("step-attempts")).to_have_text(f"{attempts} {plural}")


def history_rows(page: Page, event_type: str) -> Locator:
    return page.locator(f'[data-testid="history-row"][data-event-type="{event_type}"]')


def wait_for_approval(page: Page, topic: str) -> Locator:
    """Wait (live, no reload) until the run asks for its approval; return the panel."""
    for step_id in BEFORE_APPROVAL:
        expect_step(page, step_id, "Completed")
    panel = page.get_by_test_id("approval-panel")
    expect(panel).to_be_visible()
    expect(panel.get_by_test_id("approval-recommendation")).to_contain_text(f"For {topic}:")
    expect(page.get_by_test_id("workflow-status")).to_have_text("Waiting")
    expect(page.get_by_test_id("wait-text")).to_have_text("approval “recommendation”")
    expect(page.get_by_test_id("timeline-wait")).to_have_text("Waiting for approval")
    expect(page.get_by_test_id("state-phase")).to_contain_text('"awaiting_approval"')
    return panel


def expect_full_history(page: Page, cluster: Cluster, workflow_id: str) -> None:
    """The live table holds each journal event once, in order, and the feed has ended."""
    expect(page.get_by_test_id("live-status")).to_have_attribute("data-state", "ended")
    count = int(api(cluster, "GET", f"/v1/workflows/{workflow_id}")["workflow"]["event_count"])
    rows = page.get_by_test_id("history-row")
    expect(rows).to_have_count(count)
    expect(page.get_by_test_id("history-count")).to_have_text(str(count))
    ids = [int(i) for i in rows.evaluate_all("rows => rows.map(r => r.dataset.eventId)")]
    assert ids == list(range(1, count + 1))


# -- scenarios ------------------------------------------------------------------------------------


def test_start_a_research_run_from_the_form_approve_it_and_read_its_report(
    agent: Cluster, page: Page
) -> None:
    open_ui(page, agent)
    expect(page.get_by_role("heading", name="Workflows", level=1)).to_be_visible()
    start_research(page, "ui-approve", "durable agents")

    # The steps appear as the worker records them, and the run asks for its approval.
    panel = wait_for_approval(page, "durable agents")
    expect(history_rows(page, "WORKFLOW_SUSPENDED").last).to_contain_text(
        "waits for approval “recommendation”"
    )
    expect(page.get_by_test_id("live-status")).to_have_attribute("data-state", "live")

    panel.get_by_label("Reason").fill("ship it")
    panel.get_by_role("button", name="Approve").click()

    expect(page.get_by_test_id("workflow-status")).to_have_text("Completed")
    expect(panel).to_be_hidden()
    expect(page.get_by_test_id("actions")).to_be_hidden()
    for step_id in STEPS:
        expect_step(page, step_id, "Completed", attempts=1)
    expect(page.get_by_test_id("timeline-end")).to_contain_text("Workflow completed")
    report = page.get_by_test_id("workflow-report")
    expect(report).to_contain_text("Research report: durable agents")
    expect(report).to_contain_text("Approver's comment: ship it")
    expect(page.get_by_test_id("result-decision")).to_contain_text("approved")
    page.get_by_text("Result as JSON").click()
    result = page.get_by_test_id("workflow-result")
    expect(result).to_contain_text('"decision": "approved"')
    expect(result).to_contain_text('"delivery": "sent"')
    page.get_by_text("Result as JSON").click()
    expect(page.get_by_test_id("state-phase")).to_contain_text('"done"')
    expect(page.get_by_test_id("state-approval")).to_contain_text('"comment": "ship it"')
    received = history_rows(page, "APPROVAL_DECIDED")
    expect(received).to_have_count(1)
    expect(received).to_contain_text("approved by anonymous")
    expect(received).to_contain_text('"ship it"')
    expect(history_rows(page, "WORKFLOW_COMPLETED")).to_have_count(1)
    expect_full_history(page, agent, "ui-approve")
    # The run's size: its journal's bytes in decimal units, exact on hover, and its events.
    run = api(agent, "GET", "/v1/workflows/ui-approve")["workflow"]
    size = page.get_by_test_id("workflow-size").locator("dd span")
    expect(size).to_have_text(re.compile(rf"^\d+(\.\d)? (B|kB|MB) · {run['event_count']} events$"))
    expect(size).to_have_attribute("title", f"{run['history_bytes']} bytes")
    assert int(run["history_bytes"]) > 0

    if os.environ.get("PERDURE_UPDATE_UI_SCREENSHOT"):
        # The page of a completed run as one opens it (no toast from the approval).
        page.reload()
        expect(page.get_by_test_id("workflow-status")).to_have_text("Completed")
        expect_full_history(page, agent, "ui-approve")
        DOCS_SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(DOCS_SCREENSHOT), animations="disabled")


def test_an_approval_whose_answer_was_lost_is_decided_once_when_sent_again(
    agent: Cluster, page: Page
) -> None:
    sent: list[dict[str, Any]] = []

    def lose_the_first_answer(route: Route) -> None:
        approval_id = route.request.url.split("/v1/approvals/")[1].split("/")[0]
        sent.append({**json.loads(route.request.post_data or "{}"), "approval_id": approval_id})
        if len(sent) == 1:
            route.fetch()  # the decision reaches the gateway...
            route.abort("connectionreset")  # ...and its answer is lost on the way back
        else:
            route.continue_()

    open_ui(page, agent)
    start_research(page, "ui-twice", "retried approvals")
    panel = wait_for_approval(page, "retried approvals")
    # The worker is paused: the run stays where it was; the approval record alone is decided.
    (worker,) = [p for p in agent.processes if p.name == "worker-agent-1"]
    worker.signal(signal.SIGSTOP)
    try:
        page.route(re.compile(r"/decide(\?|$)"), lose_the_first_answer)
        panel.get_by_label("Reason").fill("once")
        panel.get_by_role("button", name="Approve").click()
        expect(panel.get_by_test_id("approval-0-message")).to_contain_text("did not answer")
        expect(history_rows(page, "APPROVAL_DECIDED")).to_have_count(1)
        # The page learns the approval is decided: nothing is left to decide, nor to send twice.
        expect(panel).to_be_hidden()
        again = requests.post(
            f"http://{agent.http_address}/v1/approvals/{sent[0]['approval_id']}/decide",
            json={k: v for k, v in sent[0].items() if k != "approval_id"},
            timeout=30,
        )
        assert (again.status_code, again.json()["error"]["reason"]) == (400, "APPROVAL_DECIDED")
    finally:
        worker.signal(signal.SIGCONT)
    expect(page.get_by_test_id("workflow-status")).to_have_text("Completed")
    expect(history_rows(page, "APPROVAL_DECIDED")).to_have_count(1)
    assert len(sent) == 1, sent
    assert re.fullmatch(r"[0-9a-f]{64}", sent[0]["details_sha256"]), sent
    assert (sent[0]["approve"], sent[0]["reason"]) == (True, "once")
    expect_full_history(page, agent, "ui-twice")


def test_the_approvals_inbox_lists_pending_approvals_and_decides_them(
    agent: Cluster, page: Page
) -> None:
    open_ui(page, agent)
    start_research(page, "ui-inbox", "inboxes")
    wait_for_approval(page, "inboxes")
    page.get_by_role("link", name="Approvals").click()
    expect(page.get_by_role("heading", name="Approvals", level=1)).to_be_visible()
    row = page.locator('[data-testid="approval-row"]').filter(has_text="ui-inbox")
    expect(row).to_have_count(1)
    expect(row.get_by_test_id("approval-recommendation")).to_contain_text("For inboxes:")
    row.get_by_label("Reason").fill("not now")
    row.get_by_role("button", name="Reject").click()
    expect(page.locator('[data-testid="approval-row"]').filter(has_text="ui-inbox")).to_have_count(
        0
    )
    done = api(agent, "GET", "/v1/workflows/ui-inbox")
    wait_until(
        lambda: (
            api(agent, "GET", "/v1/workflows/ui-inbox")["workflow"]["status"]
            == "WORKFLOW_STATUS_COMPLETED"
        ),
        60,
        "the rejected run to complete",
    )
    assert done["workflow"]["workflow_id"] == "ui-inbox"


def test_a_step_failing_once_shows_its_retry_countdown_then_the_run_goes_on(
    agent: Cluster, page: Page
) -> None:
    page.add_init_script(RECORD_RETRY_TEXTS)
    open_ui(page, agent)
    start_research(page, "ui-retry", "retries", fail_step_once="research_1")

    # The countdown computed from next_retry_time (the retry is 1 s after the failure).
    page.wait_for_function(
        """() => window.__retryTexts.some(
             (seen) => seen.step === "research_1" && /^retrying in [12] s/.test(seen.text))"""
    )
    # Then the second attempt succeeds and the run goes on to its approval.
    expect_step(page, "research_1", "Completed", attempts=2)
    failure = step(page, "research_1").get_by_test_id("step-failure")
    expect(failure).to_contain_text("Attempt 1 failed:")
    expect(failure).to_contain_text("TemporaryProviderError")
    expect(failure).to_contain_text("fail_step_once=research_1")
    attempt_failed = history_rows(page, "STEP_ATTEMPT_FAILED")
    expect(attempt_failed).to_have_count(1)
    expect(attempt_failed).to_contain_text("research_1 · attempt 1")
    expect(attempt_failed).to_contain_text("retry at")
    expect(
        history_rows(page, "WORKFLOW_SUSPENDED").filter(has_text="next attempt of step research_1")
    ).to_have_count(1)
    wait_for_approval(page, "retries")
    for step_id in ("create_plan", "research_2", "analyze", "recommend"):
        expect_step(page, step_id, "Completed", attempts=1)

    panel = page.get_by_test_id("approval-panel")
    panel.get_by_label("Reason").fill("by the panel")
    panel.get_by_role("button", name="Approve").click()
    expect(page.get_by_test_id("workflow-status")).to_have_text("Completed")
    expect(page.get_by_test_id("result-decision")).to_contain_text("by the panel")
    expect_full_history(page, agent, "ui-retry")
    # While it waited, the step said so, with the error of its first attempt.
    texts = page.evaluate("window.__retryTexts")
    assert all(seen["step"] == "research_1" for seen in texts), texts
    retrying = next(seen for seen in texts if seen["text"].startswith("retrying in"))
    assert retrying["status"] == "Retrying", texts
    assert "TemporaryProviderError" in retrying["failure"], texts
    assert "next attempt 2 at" in retrying["text"], texts


def test_the_run_page_shows_the_streamed_text_and_the_reset_of_a_worker_killed_mid_stream(
    agent: Cluster, page: Page
) -> None:
    (first,) = [p for p in agent.processes if p.name == "worker-agent-1"]
    summary = analysis_summary("streams")
    open_ui(page, agent)
    start_research(page, "ui-stream", "streams", crash_mid_stream="analyze")

    # The first attempt's tokens appear live; then its worker dies.
    analyze = stream_panel(page, "analyze")
    expect(analyze.get_by_test_id("stream-text")).to_have_text(
        "".join(tokens(summary)[:CRASH_AFTER_TOKENS]), use_inner_text=True
    )
    assert first.popen.wait(timeout=60) == CRASH_EXIT_CODE, first.output()
    expect(analyze.get_by_test_id("stream-reset")).to_have_count(0)

    # The next worker records the lost attempt: the panel drops its text, says why, and shows
    # the retry's text, the step's result, once.
    agent.start_worker("agent-2", module="examples.research_agent")
    reset = analyze.get_by_test_id("stream-reset")
    expect(reset).to_have_count(1)
    expect(reset).to_contain_text("Attempt 1 failed: the text it streamed was dropped.")
    expect(reset).to_contain_text("The step restarted: attempt 2.")
    expect(analyze.get_by_test_id("stream-attempt")).to_have_text("· attempt 2")
    expect(analyze.get_by_test_id("stream-text")).to_have_text(summary, use_inner_text=True)
    expect_step(page, "analyze", "Completed", attempts=2)

    panel = wait_for_approval(page, "streams")
    panel.get_by_role("button", name="Approve").click()
    expect(page.get_by_test_id("workflow-status")).to_have_text("Completed")
    body = api(agent, "GET", "/v1/workflows/ui-stream")["workflow"]["result"]["report"]["body"]
    report = stream_panel(page, "report")
    expect(report.get_by_test_id("stream-text")).to_have_text(body, use_inner_text=True)
    expect(report.get_by_test_id("stream-reset")).to_have_count(0)
    expect(page.get_by_test_id("stream-live")).to_have_attribute("data-state", "ended")

    # Opened afresh, the page reads the whole stream again: the same text, the same reset.
    page.reload()
    expect(stream_panel(page, "analyze").get_by_test_id("stream-text")).to_have_text(
        summary, use_inner_text=True
    )
    expect(stream_panel(page, "analyze").get_by_test_id("stream-reset")).to_have_count(1)
    expect(page.get_by_test_id("stream-live")).to_have_attribute("data-state", "ended")


def test_cancel_a_run_from_the_ui_while_a_step_runs(agent: Cluster, page: Page) -> None:
    open_ui(page, agent)
    start_research(page, "ui-cancel", "cancellation", slow_step="research_1")
    # The slow step is reported running, for a time that ticks.
    expect_step(page, "research_1", "Running", attempts=1)
    expect(step(page, "research_1")).to_have_attribute("aria-current", "step")
    duration = step(page, "research_1").get_by_test_id("step-duration")
    expect(duration).to_contain_text("running for")
    first = duration.text_content()
    expect(duration).not_to_have_text(first or "")
    expect(page.get_by_test_id("workflow-input")).to_contain_text(f'"slow_seconds": {SLOW_SECONDS}')

    actions = page.get_by_test_id("actions")
    actions.get_by_label("Cancellation reason").fill("no longer needed")
    actions.get_by_role("button", name="Cancel run").click()
    expect(page.get_by_test_id("toasts")).to_contain_text("Cancellation requested.")
    # The code sees the cancellation at its next durable call, once the step is over.
    expect(page.get_by_test_id("cancel-requested")).to_be_visible()
    expect(page.get_by_test_id("workflow-cancel-requested")).to_contain_text("yes")
    expect(history_rows(page, "CANCEL_REQUESTED")).to_contain_text("reason: no longer needed")

    expect(page.get_by_test_id("workflow-status")).to_have_text("Cancelled")
    failure = page.get_by_test_id("workflow-failure")
    expect(failure).to_contain_text("The run was cancelled")
    expect(failure).to_contain_text("no longer needed")
    expect_step(page, "research_1", "Completed", attempts=1)
    expect(step(page, "research_2")).to_have_count(0)
    expect(page.get_by_test_id("state-phase")).to_contain_text('"cancelled"')
    expect(history_rows(page, "CANCELLATION_DELIVERED")).to_have_count(1)
    expect(history_rows(page, "WORKFLOW_CANCELLED")).to_have_count(1)
    expect(page.get_by_test_id("timeline-end")).to_contain_text("Workflow cancelled")
    expect(page.get_by_test_id("cancel-requested")).to_be_hidden()
    expect(actions).to_be_hidden()
    expect_full_history(page, agent, "ui-cancel")


def test_the_apis_errors_are_shown_and_terminate_asks_for_a_confirmation(
    agent: Cluster, page: Page
) -> None:
    open_ui(page, agent, "#/start")
    generic = page.get_by_test_id("generic-form")
    # Input that is not JSON is refused before anything is sent.
    generic.get_by_label("Workflow type").fill("research_agent")
    generic.get_by_label("Input (JSON)").fill('{"topic": ')
    generic.get_by_role("button", name="Start workflow").click()
    message = page.get_by_test_id("generic-start-message")
    expect(message).to_contain_text("The input is not valid JSON")
    expect(generic.get_by_label("Input (JSON)")).to_have_attribute("aria-invalid", "true")
    expect(generic.get_by_label("Input (JSON)")).to_be_focused()
    # The API's own error, with its status, code, reason and message.
    generic.get_by_label("Workflow type").fill("no_such_workflow")
    generic.get_by_label("Input (JSON)").fill("{}")
    generic.get_by_role("button", name="Start workflow").click()
    expect(message).to_contain_text("404 NOT_FOUND (WORKFLOW_TYPE_NOT_REGISTERED)")
    expect(message).to_contain_text("workflow type 'no_such_workflow' is not registered")
    expect(message).to_have_attribute("aria-live", "polite")

    # A generic start of the research agent.
    generic.get_by_label("Workflow type").fill("research_agent")
    generic.get_by_label("Workflow ID (optional)").fill("ui-terminate")
    generic.get_by_label("Input (JSON)").fill('{"topic": "termination"}')
    generic.get_by_role("button", name="Start workflow").click()
    expect(page.get_by_test_id("workflow-id")).to_have_text("ui-terminate")
    wait_for_approval(page, "termination")

    actions = page.get_by_test_id("actions")
    actions.get_by_label("Signal name").fill("bad name!")
    actions.get_by_role("button", name="Send signal").click()
    signal_message = page.get_by_test_id("signal-message")
    expect(signal_message).to_contain_text("400 INVALID_ARGUMENT (INVALID_REQUEST)")
    expect(signal_message).to_contain_text("signal_name 'bad name!' is not a valid name")
    actions.get_by_label("Signal name").fill("approval")
    actions.get_by_label("Payload (JSON)").fill("{oops")
    actions.get_by_role("button", name="Send signal").click()
    expect(signal_message).to_contain_text("The payload is not valid JSON")

    # Terminate asks first; "keep it running" keeps it running.
    actions.get_by_label("Termination reason").fill("stuck in review")
    actions.get_by_role("button", name="Terminate…").click()
    confirm = actions.get_by_role("button", name="Yes, terminate now")
    expect(confirm).to_be_focused()
    actions.get_by_role("button", name="Keep it running").click()
    expect(confirm).to_be_hidden()
    expect(page.get_by_test_id("workflow-status")).to_have_text("Waiting")
    actions.get_by_role("button", name="Terminate…").click()
    actions.get_by_role("button", name="Yes, terminate now").click()

    expect(page.get_by_test_id("workflow-status")).to_have_text("Terminated")
    failure = page.get_by_test_id("workflow-failure")
    expect(failure).to_contain_text("The run was terminated")
    expect(failure).to_contain_text("stuck in review")
    expect(history_rows(page, "WORKFLOW_TERMINATED")).to_contain_text("reason: stuck in review")
    expect(actions).to_be_hidden()
    expect_full_history(page, agent, "ui-terminate")


def test_a_payload_is_sent_and_shown_with_its_numbers_as_written(
    agent: Cluster, page: Page
) -> None:
    open_ui(page, agent, "#/start")
    generic = page.get_by_test_id("generic-form")
    generic.get_by_label("Workflow type").fill("research_agent")
    generic.get_by_label("Workflow ID (optional)").fill("ui-exact")
    # Unknown fields: the run fails at once, and its input is still what was typed.
    generic.get_by_label("Input (JSON)").fill('{"n": 18446744073709551617, "f": 1.0}')
    generic.get_by_role("button", name="Start workflow").click()
    expect(page.get_by_test_id("workflow-id")).to_have_text("ui-exact")
    shown = page.get_by_test_id("workflow-input")
    expect(shown).to_contain_text('"n": 18446744073709551617')  # not 18446744073709552000
    expect(shown).to_contain_text('"f": 1.0')
    with agent.client() as client:
        sent = client.describe("ui-exact").workflow.input
    assert sent.data == b'{"n":18446744073709551617,"f":1.0}'


def test_the_list_filters_searches_pages_and_refreshes_itself(agent: Cluster, page: Page) -> None:
    for workflow_id in ("list-a-1", "list-b-1", "list-b-2"):
        api(
            agent,
            "POST",
            "/v1/workflows",
            json={"workflow_type": "research_agent", "workflow_id": workflow_id},
        )
    open_ui(page, agent)
    rows = page.get_by_test_id("workflow-row")
    expect(rows).to_have_count(3)
    for workflow_id in ("list-a-1", "list-b-1", "list-b-2"):
        expect(page.locator(f'[data-workflow-id="{workflow_id}"]')).to_contain_text("Waiting")

    search = page.get_by_label("Workflow ID starts with")
    search.fill("list-a")
    expect(rows).to_have_count(1)
    row = page.locator('[data-workflow-id="list-a-1"]')
    expect(row).to_contain_text("research_agent")
    expect(page).to_have_url(re.compile(r"#/\?prefix=list-a$"))

    # It refreshes by itself, keeping the filter and the focus in the search box.
    decide_pending(agent.gateway, "list-a-1", approve=False)
    expect(row).to_contain_text("Completed")
    expect(row).to_contain_text("closed")
    expect(rows).to_have_count(1)
    expect(search).to_be_focused()
    expect(search).to_have_value("list-a")

    search.fill("")
    page.get_by_label("Status").select_option("WORKFLOW_STATUS_WAITING")
    expect(rows).to_have_count(2)
    expect(row).to_have_count(0)
    expect(page).to_have_url(re.compile(r"#/\?status=waiting$"))
    page.get_by_label("Workflow type").fill("nothing_like_it")
    expect(page.get_by_test_id("workflow-table")).to_contain_text("No workflow runs match")
    page.get_by_label("Workflow type").fill("research_agent")
    expect(rows).to_have_count(2)

    # The filters live in the address: a reload keeps them.
    page.reload()
    expect(page.get_by_label("Status")).to_have_value("WORKFLOW_STATUS_WAITING")
    expect(page.get_by_label("Workflow type")).to_have_value("research_agent")
    expect(rows).to_have_count(2)

    # Paging follows next_page_token (pages of 50: 51 runs make two).
    page.get_by_label("Status").select_option("")
    for number in range(48):  # (an input the agent refuses: each fails at once, cheaply)
        api(
            agent,
            "POST",
            "/v1/workflows",
            json={
                "workflow_type": "research_agent",
                "workflow_id": f"page-{number:02d}",
                "input": "not an object",
            },
        )
    expect(rows).to_have_count(50)
    older = page.get_by_role("button", name="Older →")
    expect(older).to_be_enabled()
    older.click()
    expect(rows).to_have_count(1)
    expect(page.locator('[data-workflow-id="list-a-1"]')).to_have_count(1)  # the oldest
    expect(older).to_be_disabled()
    page.get_by_role("button", name="← Newer").click()
    expect(rows).to_have_count(50)

    page.get_by_role("link", name="list-b-1", exact=True).click()
    expect(page.get_by_test_id("workflow-id")).to_have_text("list-b-1")


def test_the_live_feed_resumes_after_the_gateway_restarts(agent: Cluster, page: Page) -> None:
    feeds: list[dict[str, str]] = []
    streams: list[dict[str, str]] = []
    page.on(
        "request",
        lambda request: feeds.append(request.headers) if "/events" in request.url else None,
    )
    page.on(
        "request",
        lambda request: streams.append(request.headers) if "/streams/" in request.url else None,
    )
    open_ui(page, agent)
    start_research(page, "ui-resume", "resumption")
    wait_for_approval(page, "resumption")
    expect(page.get_by_test_id("live-status")).to_have_attribute("data-state", "live")
    summary = analysis_summary("resumption")
    analyze = stream_panel(page, "analyze").get_by_test_id("stream-text")
    expect(analyze).to_have_text(summary, use_inner_text=True)
    seen = page.get_by_test_id("history-row").count()

    (gateway,) = [p for p in agent.processes if p.name == "gateway" and p.popen.poll() is None]
    gateway.kill()
    expect(page.get_by_test_id("live-status")).to_have_attribute("data-state", "reconnecting")
    agent.start_service("gateway")
    expect(page.get_by_test_id("live-status")).to_have_attribute("data-state", "live")
    # The feed resumed after the last event the page had, not from the start.
    resumed = [headers.get("last-event-id") for headers in feeds[1:]]
    assert str(seen) in resumed, (seen, feeds)

    panel = page.get_by_test_id("approval-panel")
    panel.get_by_label("Reason").fill("after the restart")
    panel.get_by_role("button", name="Approve").click()
    expect(page.get_by_test_id("workflow-status")).to_have_text("Completed")
    expect(page.get_by_test_id("page-error")).to_be_hidden()
    expect_full_history(page, agent, "ui-resume")
    # The output stream resumed after the last frame it showed too: the report's text came
    # through it, and analyze's is there once.
    body = api(agent, "GET", "/v1/workflows/ui-resume")["workflow"]["result"]["report"]["body"]
    report = stream_panel(page, "report").get_by_test_id("stream-text")
    expect(report).to_have_text(body, use_inner_text=True)
    expect(analyze).to_have_text(summary, use_inner_text=True)
    expect(page.get_by_test_id("stream-live")).to_have_attribute("data-state", "ended")
    frames = str(len(tokens(summary)))
    assert frames in [headers.get("last-event-id") for headers in streams[1:]], streams


def test_an_api_key_from_the_link_is_kept_and_a_401_asks_for_one(
    start_cluster: Callable[..., Cluster], page: Page
) -> None:
    cluster = start_cluster(PERDURE_AUTH="on")
    operator = make_key(cluster, "default", "operator")
    reader = make_key(cluster, "default", "reader")

    # A key in the query string reaches the server: the UI never takes one from there, and
    # drops it from the address.
    page.goto(f"http://{cluster.http_address}/?key={operator}#/")
    expect(page).to_have_url(re.compile(r"/#/$"))
    expect(page.get_by_test_id("api-key-button")).to_have_text("API key: none")
    expect(page.get_by_test_id("auth-banner")).to_be_visible()
    assert page.evaluate("sessionStorage.getItem('perdure.apiKey')") is None

    # The link `perdure dev` prints: the key is taken, then dropped from the address.
    open_ui(page, cluster, f"#key={operator}")
    expect(page).to_have_url(re.compile(r"/#/$"))
    assert operator not in page.url
    key_button = page.get_by_test_id("api-key-button")
    expect(key_button).to_have_text(f"API key: …{operator[-4:]}")
    expect(page.get_by_test_id("list-summary")).to_have_text("No runs")
    expect(page.get_by_test_id("auth-banner")).to_be_hidden()
    assert page.evaluate("sessionStorage.getItem('perdure.apiKey')") == operator

    # Without a key, the 401 asks for one.
    key_button.click()
    page.get_by_role("button", name="Clear key").click()
    expect(key_button).to_have_text("API key: none")
    banner = page.get_by_test_id("auth-banner")
    expect(banner).to_be_visible()
    expect(banner).to_contain_text("An API key is needed")
    expect(page.get_by_test_id("list-error")).to_contain_text("401 UNAUTHENTICATED")
    banner.get_by_label("API key").fill(reader)
    banner.get_by_role("button", name="Use this key").click()
    expect(banner).to_be_hidden()
    expect(page.get_by_test_id("list-summary")).to_have_text("No runs")
    expect(key_button).to_have_text(f"API key: …{reader[-4:]}")

    # A reader may look but not start: the 403 says so where the start was tried.
    nav(page, "Start a workflow")
    page.get_by_test_id("research-form").get_by_role("button", name="Start research run").click()
    expect(page.get_by_test_id("start-message")).to_contain_text("403 PERMISSION_DENIED")

    # Another namespace: every call carries ?namespace=, which this key may not read.
    nav(page, "Workflows")
    namespace = page.get_by_label("Namespace")
    namespace.fill("elsewhere")
    namespace.press("Enter")
    expect(page.get_by_test_id("list-error")).to_contain_text("403 PERMISSION_DENIED")
    namespace.fill("")
    namespace.press("Enter")
    expect(page.get_by_test_id("list-summary")).to_have_text("No runs")
    expect(page.get_by_test_id("list-error")).to_be_hidden()

    # A link carrying another key does not switch the tab's key unasked.
    key_button = page.get_by_test_id("api-key-button")
    offer = page.get_by_test_id("key-offer")
    open_ui(page, cluster, f"#/start?key={operator}")
    expect(offer).to_be_visible()
    expect(offer).to_contain_text(f"…{operator[-4:]}")
    expect(offer).to_contain_text(f"…{reader[-4:]}")
    expect(page).to_have_url(re.compile(r"/#/start$"))
    offer.get_by_role("button", name="Keep this tab's key").click()
    expect(offer).to_be_hidden()
    expect(key_button).to_have_text(f"API key: …{reader[-4:]}")
    open_ui(page, cluster, f"#key={operator}")
    offer.get_by_role("button", name="Use the link's key").click()
    expect(offer).to_be_hidden()
    expect(key_button).to_have_text(f"API key: …{operator[-4:]}")
    assert page.evaluate("sessionStorage.getItem('perdure.apiKey')") == operator


def test_a_model_call_step_shows_its_model_tokens_and_cost(agent: Cluster, page: Page) -> None:
    body = {
        "workflow_type": "research_agent",
        "workflow_id": "ui-usage",
        "input": {"topic": "usage", "model_tokens": 2000},
    }
    api(agent, "POST", "/v1/workflows", json=body)
    open_ui(page, agent, "#/workflows/ui-usage")
    expect_step(page, "model", "Completed")
    described = api(agent, "GET", "/v1/workflows/ui-usage")
    [first] = [s for s in described["steps"] if s["step_id"] == "model"]
    units, cost = first["usage"]["usage"]["units"], int(first["usage"]["usage"]["cost_micros"])
    expect(step(page, "model").get_by_test_id("step-usage")).to_have_text(
        f"offline-deterministic-1 · {units} tokens · cost {cost // 10**6}.{cost % 10**6:06d}"
    )
