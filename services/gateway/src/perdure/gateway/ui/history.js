// A run's event history card: the journal's events as table rows, oldest first, as the live
// feed brings them, and the feed's state.

import { h } from "./dom.js";
import { eventTypeName, failureText, fmtClock, jsonBlock, shortJson, timeEl, waitText } from "./format.js";
import { liveIndicator } from "./sse.js";

function eventDetail(event) {
  const type = event.event_type;
  switch (type) {
    case "EVENT_TYPE_WORKFLOW_STARTED": return `input ${shortJson(event.payload)}`;
    case "EVENT_TYPE_STEP_COMPLETED": return `output ${shortJson(event.payload)}`;
    case "EVENT_TYPE_STEP_FAILED":
    case "EVENT_TYPE_WORKFLOW_FAILED":
    case "EVENT_TYPE_WORKFLOW_PARKED": return failureText(event.failure);
    case "EVENT_TYPE_STEP_ATTEMPT_FAILED":
      return `${failureText(event.failure)}${event.due_time ? ` · retry at ${fmtClock(event.due_time)}` : ""}`;
    case "EVENT_TYPE_TIMER_STARTED": return `fires at ${fmtClock(event.due_time)}`;
    case "EVENT_TYPE_SIGNAL_RECEIVED":
      return `${shortJson(event.payload)}${event.signal_id ? ` · id ${event.signal_id}` : ""}`;
    case "EVENT_TYPE_SIGNAL_CONSUMED":
      return `took event${(event.consumed_event_ids || []).length === 1 ? "" : "s"} ${(event.consumed_event_ids || []).join(", ")} → ${shortJson(event.payload)}`;
    case "EVENT_TYPE_SIGNAL_TIMED_OUT": return "the wait timed out";
    case "EVENT_TYPE_STATE_UPDATED": return `= ${shortJson(event.payload)}`;
    case "EVENT_TYPE_WORKFLOW_SUSPENDED": {
      const wait = event.wait;
      if (!wait) return "";
      return `waits for ${waitText(wait)}${wait.until ? ` until ${fmtClock(wait.until)}` : ""}`;
    }
    case "EVENT_TYPE_CANCEL_REQUESTED":
    case "EVENT_TYPE_WORKFLOW_TERMINATED":
      return event.failure?.message ? `reason: ${event.failure.message}` : "no reason given";
    case "EVENT_TYPE_CANCELLATION_DELIVERED": return "raised into the code";
    case "EVENT_TYPE_WORKFLOW_CANCELLED": return failureText(event.failure);
    case "EVENT_TYPE_WORKFLOW_COMPLETED": return `result ${shortJson(event.payload)}`;
    case "EVENT_TYPE_WORKFLOW_CONTINUED_AS_NEW": return `next run's input ${shortJson(event.payload)}`;
    case "EVENT_TYPE_APPROVAL_REQUESTED": return `approval ${event.approval_id} asks ${shortJson(event.payload)}`;
    case "EVENT_TYPE_APPROVAL_DECIDED": return `${event.payload?.approved ? "approved" : "rejected"} by ${event.payload?.decided_by} ${shortJson(event.payload?.reason ?? "")}`;
    case "EVENT_TYPE_APPROVAL_ESCALATED": return `escalated to ${(event.payload?.escalate_to ?? []).join(", ")}`;
    case "EVENT_TYPE_APPROVAL_EXPIRED": return "expired undecided";
    case "EVENT_TYPE_PATCH_RECORDED":
      return `new code path from call #${event.position || 0}`;
    case "EVENT_TYPE_STEP_SCHEDULED":
      return `on ${event.task_queue || "?"} · input ${shortJson(event.payload)}`;
    case "EVENT_TYPE_CHILD_WORKFLOW_STARTED":
      return `child ${event.child_workflow_id || "?"}${event.child_run_id ? "" : " (not started)"} on ${event.task_queue || "?"} · input ${shortJson(event.payload)}`;
    case "EVENT_TYPE_CHILD_WORKFLOW_COMPLETED":
      return `child ${event.child_workflow_id} · result ${shortJson(event.payload)}`;
    case "EVENT_TYPE_CHILD_WORKFLOW_FAILED":
      return `child ${event.child_workflow_id} · ${failureText(event.failure)}`;
    default: return "";
  }
}

const STEP_EVENTS = new Set([
  "EVENT_TYPE_STEP_COMPLETED", "EVENT_TYPE_STEP_FAILED", "EVENT_TYPE_STEP_ATTEMPT_FAILED",
  "EVENT_TYPE_STEP_SCHEDULED", "EVENT_TYPE_CHILD_WORKFLOW_STARTED",
  "EVENT_TYPE_CHILD_WORKFLOW_COMPLETED", "EVENT_TYPE_CHILD_WORKFLOW_FAILED",
]);

/** The step (with its attempt when it says something) or the signal, timer or state key. */
function eventSubject(event) {
  if (STEP_EVENTS.has(event.event_type) && event.step_id) {
    const attempt = Number(event.attempt || 0);
    const showAttempt = attempt > 1 || event.event_type === "EVENT_TYPE_STEP_ATTEMPT_FAILED";
    return showAttempt ? `${event.step_id} · attempt ${attempt}` : event.step_id;
  }
  if (event.name) return event.name;
  // The SDK's own calls (timers, signal waits, state) have internal ids such as "$state:x".
  if (event.step_id && !event.step_id.startsWith("$")) return event.step_id;
  return "";
}

function eventKind(type) {
  if (/FAILED|PARKED|TERMINATED|TIMED_OUT/.test(type)) return "bad";
  if (/CANCEL/.test(type)) return "cancel";
  if (/COMPLETED/.test(type)) return "good";
  if (/SIGNAL/.test(type)) return "signal";
  if (/SUSPENDED|TIMER/.test(type)) return "wait";
  return "plain";
}

/** The history card; `events` maps each event's id to the event, for the rest of the page. */
export function historyCard() {
  const events = new Map();
  const historyBody = h("tbody", {});
  const live = liveIndicator("live-status");
  const historyCount = h("span", { class: "count", "data-testid": "history-count" }, "0");
  const historyWrap = h("div", {
    class: "table-wrap history-wrap", tabindex: "0", role: "region", "aria-label": "Event history, oldest first",
  },
  h("table", { class: "history", "data-testid": "history-table" },
    h("caption", { class: "visually-hidden" }, "Journal events, oldest first"),
    h("thead", {}, h("tr", {},
      h("th", { scope: "col", class: "num" }, "#"),
      h("th", { scope: "col" }, "Event"),
      h("th", { scope: "col" }, "Time"),
      h("th", { scope: "col" }, "Step / name"),
      h("th", { scope: "col" }, "Detail"))),
    historyBody));
  const element = h("section", { class: "card", id: "history", "aria-labelledby": "history-title" },
    h("div", { class: "card-head" },
      h("h2", { id: "history-title" }, "Event history ", historyCount),
      live.element),
    historyWrap);

  /** Show an event in its place by id (an event already shown is skipped). */
  function add(event) {
    const eventId = Number(event.event_id);
    if (events.has(eventId)) return;
    events.set(eventId, event);
    const nearBottom = historyWrap.scrollHeight - historyWrap.scrollTop - historyWrap.clientHeight < 40;
    const type = event.event_type || "";
    const detail = eventDetail(event);
    const row = h("tr", { class: `ev ev-${eventKind(type)}`, "data-testid": "history-row", "data-event-id": String(eventId), "data-event-type": eventTypeName(type) },
      h("td", { class: "num mono" }, String(eventId)),
      h("td", { class: "ev-type" }, h("span", { class: "ev-dot", "aria-hidden": "true" }), eventTypeName(type)),
      h("td", { class: "mono small" }, timeEl(event.event_time, fmtClock)),
      h("td", { class: "mono small" }, eventSubject(event)),
      h("td", { class: "ev-detail" },
        h("details", {}, h("summary", {}, h("span", { class: "clamp" }, detail || "details")),
          jsonBlock(event))));
    // Events arrive in order; after a reconnect, place any straggler where it belongs.
    let before = null;
    for (let i = historyBody.children.length - 1; i >= 0; i--) {
      const other = historyBody.children[i];
      if (Number(other.dataset.eventId) < eventId) break;
      before = other;
    }
    historyBody.insertBefore(row, before);
    historyCount.textContent = String(events.size);
    if (nearBottom) historyWrap.scrollTop = historyWrap.scrollHeight;
  }

  return { element, events, add, setLive: live.set };
}
