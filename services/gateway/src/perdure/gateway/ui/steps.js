// The Steps card: a run's steps as a timeline (status, attempts, durations, retries,
// failures, outputs), ending with what the run waits for or how it ended.

import { arrange, h, section } from "./dom.js";
import {
  OPEN_STATUSES, failureBlock, fmtClock, fmtDuration, fmtMicros, fmtSeconds, jsonBlock, shortJson,
  statusLabel, stepBadge, timeEl, toMillis, waitText,
} from "./format.js";

/** The Steps card; `events` is the history's map of journal events, for what describe omits. */
export function stepsCard(events) {
  const stepsList = h("ol", { class: "timeline", "data-testid": "steps" });
  const stepsEmpty = h("p", { class: "muted" }, "No step recorded yet.");
  const stepItems = new Map();
  const openOutputs = new Set();

  function renderSteps(described) {
    const steps = described.steps || [];
    const run = described.workflow || {};
    stepsEmpty.hidden = steps.length > 0;
    stepsEmpty.textContent = OPEN_STATUSES.has(run.status) ? "No step recorded yet." : "No step was recorded.";
    const wanted = [];
    for (const step of steps) {
      const current = described.current_step === step.step_id && OPEN_STATUSES.has(run.status);
      const earlier = step.failure ? null : lastAttemptFailure(step.step_id);
      // A running step's start is not reported until it ends: the run's last journal event
      // before it is when the worker went on to it.
      const since = step.status === "STEP_STATUS_RUNNING" && !step.start_time
        ? lastEventTime() || run.update_time || "" : "";
      const signature = JSON.stringify([step, current, earlier?.event_id ?? "", since]);
      let entry = stepItems.get(step.step_id);
      if (!entry || entry.signature !== signature) {
        const element = stepItem(step, current, earlier, since);
        if (entry) {
          // Keep what the reader opened.
          const opened = [...entry.element.querySelectorAll("details")].map((d) => d.open);
          element.querySelectorAll("details").forEach((d, i) => { if (opened[i]) d.open = true; });
          entry.element.replaceWith(element);
        }
        entry = { element, signature };
        stepItems.set(step.step_id, entry);
      }
      wanted.push(entry.element);
    }
    // The run's position after its steps: what it waits for, or how it ended.
    const tail = timelineTail(run, described);
    const tailKey = tail ? tail.dataset.key : "";
    let tailEl = stepsList.querySelector(".timeline-tail");
    if (tailEl?.dataset.key !== tailKey) {
      tailEl?.remove();
      tailEl = tail;
    }
    if (tailEl) wanted.push(tailEl);
    for (const child of [...stepsList.children]) if (!wanted.includes(child)) child.remove();
    arrange(stepsList, wanted);
  }

  function timelineTail(run, described) {
    let label = null;
    let kind = "wait";
    let testid = "timeline-wait";
    let detail = null;
    const wait = run.wait;
    if (run.status === "WORKFLOW_STATUS_WAITING" && wait && wait.kind !== "WAIT_KIND_RETRY") {
      label = `Waiting for ${waitText(wait)}`;
      if (wait.kind === "WAIT_KIND_APPROVAL") label = "Waiting for approval";
      detail = wait.until ? h("span", { dataset: { countdown: wait.until, countdownPrefix: "ends in " } }) : null;
    } else if (run.status === "WORKFLOW_STATUS_RUNNING" && !described.current_step) {
      label = "Running";
      kind = "running";
    } else if (!OPEN_STATUSES.has(run.status)) {
      label = `Workflow ${statusLabel(run.status).toLowerCase()}`;
      kind = { WORKFLOW_STATUS_COMPLETED: "completed", WORKFLOW_STATUS_CANCELLED: "cancelled" }[run.status] ?? "ended";
      testid = "timeline-end";
      detail = run.close_time ? timeEl(run.close_time) : null;
    }
    if (!label) return null;
    const key = JSON.stringify([label, kind, wait?.until ?? "", run.close_time ?? ""]);
    return h("li", { class: `step timeline-tail step-${kind}`, "data-testid": testid, dataset: { key } },
      h("span", { class: "step-marker", "aria-hidden": "true" }),
      h("div", { class: "step-body" },
        h("div", { class: "step-head" }, h("span", { class: "step-name" }, label),
          detail ? h("span", { class: "step-duration muted" }, detail) : null)));
  }

  /** The journal's latest failed attempt of a step (describe keeps only a current error). */
  function lastAttemptFailure(stepId) {
    let found = null;
    for (const event of events.values()) {
      if (event.event_type === "EVENT_TYPE_STEP_ATTEMPT_FAILED" && event.step_id === stepId
        && event.failure && (!found || Number(event.event_id) > Number(found.event_id))) {
        found = event;
      }
    }
    return found;
  }

  function lastEventTime() {
    let last = null;
    for (const event of events.values()) {
      if (!last || Number(event.event_id) > Number(last.event_id)) last = event;
    }
    return last?.event_time ?? "";
  }

  function stepItem(step, current, earlier, since) {
    const status = step.status || "STEP_STATUS_UNSPECIFIED";
    const bare = status.replace(/^STEP_STATUS_/, "").toLowerCase();
    const attempts = Number(step.attempts || 0);
    let duration = null;
    if (step.start_time && step.complete_time) {
      duration = h("span", { class: "step-duration", "data-testid": "step-duration", title: "first attempt's start to outcome" },
        `took ${fmtDuration(toMillis(step.complete_time) - toMillis(step.start_time))}`);
    } else if (status === "STEP_STATUS_RUNNING" && (step.start_time || since)) {
      const prefix = step.start_time ? "running for " : "running for ~";
      const from = step.start_time || since;
      duration = h("span", {
        class: "step-duration", "data-testid": "step-duration",
        title: step.start_time ? null : "estimated from the run's last journal event before the step",
        dataset: { since: from, sincePrefix: prefix },
      }, `${prefix}${fmtDuration(Date.now() - toMillis(from))}`);
    } else if (step.complete_time) {
      duration = h("span", { class: "step-duration muted" }, timeEl(step.complete_time));
    }
    const retry = status === "STEP_STATUS_RETRYING" && step.next_retry_time
      ? h("p", { class: "step-retry", "data-testid": "step-retry", role: "timer" },
        h("span", { dataset: { countdown: step.next_retry_time, countdownPrefix: "retrying in ", countdownDone: "retrying now…" } },
          `retrying in ${fmtSeconds((toMillis(step.next_retry_time) - Date.now()) / 1000)}`),
        h("span", { class: "muted" }, " · next attempt ", String(attempts + 1), " at ", timeEl(step.next_retry_time, fmtClock)))
      : null;
    const shown = step.failure ?? earlier?.failure;
    const past = step.succeeded || (!step.failure && earlier);
    const failure = shown
      ? h("div", { class: `step-failure ${past ? "step-failure-past" : ""}`, "data-testid": "step-failure" },
        past ? h("span", { class: "muted small" },
          earlier?.attempt ? `Attempt ${earlier.attempt} failed:` : "An earlier attempt failed:") : null,
        failureBlock(shown))
      : null;
    const heartbeat = step.heartbeat_time
      ? h("p", { class: "muted small" }, "Last heartbeat from the worker ", timeEl(step.heartbeat_time, fmtClock),
        step.heartbeat_details !== undefined && step.heartbeat_details !== null
          ? `: ${shortJson(step.heartbeat_details)}` : "")
      : null;
    // The output opens under the step, from a toggle in its head line (keeps the timeline
    // compact); the toggle's state survives refreshes.
    let toggle = null;
    let output = null;
    if (step.succeeded) {
      const outputId = `output-${step.step_id.replace(/[^\w-]/g, "_")}`;
      const open = openOutputs.has(step.step_id);
      output = jsonBlock(step.output ?? null, { id: outputId, class: "json step-output", hidden: !open });
      toggle = h("button", {
        type: "button", class: "btn-link", "aria-expanded": String(open), "aria-controls": outputId,
        "data-testid": "step-output-toggle",
      }, "Output");
      toggle.addEventListener("click", () => {
        const opening = output.hidden;
        output.hidden = !opening;
        toggle.setAttribute("aria-expanded", String(opening));
        if (opening) openOutputs.add(step.step_id); else openOutputs.delete(step.step_id);
      });
    }
    return h("li", {
      class: `step step-${bare}${current ? " step-current" : ""}`,
      "data-testid": `step-${step.step_id}`,
      "data-step-id": step.step_id,
      "data-status": status,
      "aria-current": current ? "step" : null,
    },
    h("span", { class: "step-marker", "aria-hidden": "true" }),
    h("div", { class: "step-body" },
      h("div", { class: "step-head" },
        h("span", { class: "step-name mono" }, step.step_id || step.name),
        stepBadge(status, { "data-testid": "step-status" }),
        h("span", { class: "step-attempts", "data-testid": "step-attempts" },
          `${attempts} attempt${attempts === 1 ? "" : "s"}`),
        usageSpan(step.usage), duration, toggle),
      retry, failure, heartbeat, output));
  }

  // What the step reported using (a model call's model, tokens and cost), summed over its
  // attempts; amounts are int64 strings, shown exactly.
  function usageSpan(usage) {
    if (!usage) return null;
    const units = usage.usage?.units ?? "0";
    const cost = usage.usage?.cost_micros ?? "0";
    const parts = [usage.model || null, `${units} ${usage.model ? "tokens" : "units"}`, `cost ${fmtMicros(cost)}`];
    return h("span", { class: "step-usage muted", "data-testid": "step-usage", title: "what the step reported using, over its attempts" },
      parts.filter(Boolean).join(" · "));
  }

  return { element: section("Steps", { id: "steps" }, stepsEmpty, stepsList), update: renderSteps };
}
