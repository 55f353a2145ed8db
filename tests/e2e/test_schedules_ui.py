"""The web UI's Schedules page in a real (headless) browser against a real cluster: a schedule
created over the HTTP API is listed, paused and unpaused, triggered (its run linked) and
deleted, from its buttons. The page runs under the gateway's Content-Security-Policy: a
violation or a JavaScript error fails the test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
import requests

from tests.fixtures.browser import TIMEOUT_MS, VIEWPORT, chromium, screenshot
from tests.fixtures.cluster import Cluster

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

MODULE = "tests.e2e.schedule_workflows"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as running:
        from playwright.sync_api import expect

        expect.set_options(timeout=TIMEOUT_MS)
        yield running


@pytest.fixture
def page(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
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
    finally:
        try:
            screenshot(tab, request.node.name)
        finally:
            context.close()
    assert not errors, f"JavaScript errors in the page: {errors}"


def expect(target: Any) -> Any:
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(target)


def http(cluster: Cluster, method: str, path: str, **kwargs: Any) -> Any:
    answer = requests.request(method, f"http://{cluster.http_address}{path}", timeout=30, **kwargs)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_the_schedules_page_lists_pauses_triggers_and_deletes(shared: Cluster, page: Page) -> None:
    body = {
        "schedule": {
            "schedule_id": "nightly-report",
            "spec": {"cron": "0 3 * * *"},
            "action": {"workflow_type": "tick", "input": {"n": 1}},
            "overlap_policy": "SCHEDULE_OVERLAP_POLICY_BUFFER_ONE",
        }
    }
    created = http(shared, "POST", "/v1/schedules", json=body)
    assert created["schedule"]["next_fire_times"][0].endswith("T03:00:00Z")
    page.goto(f"http://{shared.http_address}/#/")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Schedules").click()
    expect(page.get_by_role("heading", name="Schedules", level=1)).to_be_visible()
    row = page.locator('[data-testid=schedule-row][data-schedule-id="nightly-report"]')
    expect(row).to_contain_text("cron 0 3 * * *")
    expect(row).to_contain_text("Buffer one")
    expect(row.get_by_test_id("schedule-state")).to_have_text("Active")

    row.get_by_test_id("schedule-pause").click()
    expect(row.get_by_test_id("schedule-state")).to_have_text("Paused")
    assert http(shared, "GET", "/v1/schedules/nightly-report")["schedule"]["schedule"]["paused"]
    row.get_by_test_id("schedule-unpause").click()
    expect(row.get_by_test_id("schedule-state")).to_have_text("Active")

    row.get_by_test_id("schedule-trigger").click()
    expect(row.get_by_test_id("schedule-runs")).to_have_text("1")
    link = row.get_by_role("link")
    expect(link).to_contain_text("nightly-report-")
    run_id = link.text_content()
    assert run_id is not None
    assert http(shared, "GET", f"/v1/workflows/{run_id}")["workflow"]["workflow_id"] == run_id
    screenshot(page, "schedules-page-listed")

    row.get_by_test_id("schedule-delete").click()
    expect(row.get_by_test_id("schedule-delete")).to_have_text("Confirm delete")
    row.get_by_test_id("schedule-delete").click()
    expect(page.get_by_test_id("schedules-empty")).to_be_visible()
    gone = requests.get(f"http://{shared.http_address}/v1/schedules/nightly-report", timeout=30)
    assert gone.status_code == 404 and gone.json()["error"]["reason"] == "SCHEDULE_NOT_FOUND"
