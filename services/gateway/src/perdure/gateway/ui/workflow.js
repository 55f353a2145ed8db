// The page of one run (#/workflows/<id>): its status, details, result or failure, the text
// its steps stream, steps, state, signals and history, kept current by the live feeds and by
// polling describe.

import { ApiError, api, errorText, workflowPath } from "./api.js";
import { $, arrange, debounce, fill, h, isAbort, section } from "./dom.js";
import { followEvents } from "./feed.js";
import {
  OPEN_STATUSES, enumLabel, failureBlock, fmtBytes, fmtDuration, fmtSeconds, jsonBlock, statusBadge,
  timeEl, toMillis, waitText,
} from "./format.js";
import { actionsCard, resumePanel } from "./actions.js";
import { approvalPanel } from "./approvals.js";
import { childrenCard, parentLink } from "./children.js";
import { historyCard } from "./history.js";
import { pauseCard, pauseTag } from "./pauses.js";
import { settings } from "./settings.js";
import { stepsCard } from "./steps.js";
import { outputCard } from "./stream.js";

const DESCRIBE_POLL_MS = 3000;
const DESCRIBE_DEBOUNCE_MS = 150;

/** A Markdown-ish report body as safe DOM: "# " headings, "- " items, paragraphs. */
function renderReportBody(text) {
  const out = [];
  let list = null;
  for (const line of String(text).split("\n")) {
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    const item = /^\s*[-*]\s+(.*)$/.exec(line);
    if (item) {
      list ??= h("ul", {});
      list.append(h("li", {}, item[1]));
      continue;
    }
    if (list) { out.push(list); list = null; }
    if (heading) {
      const level = Math.min(6, heading[1].length + 2);
      out.push(h(`h${level}`, { class: "report-heading" }, heading[2]));
    } else if (line.trim()) {
      out.push(h("p", {}, line));
    }
  }
  if (list) out.push(list);
  return out;
}

export function workflowView(root, id) {
  const controller = new AbortController();
  const signal = controller.signal;
  const view = { closed: false, inflight: false, again: false };

  // Static skeleton: the parts that refresh are filled in place; the forms are built once
  // so typing is never interrupted by a refresh.
  const statusSlot = h("span", { class: "status-slot" });
  const meta = h("dl", { class: "meta", "data-testid": "workflow-meta" });
  const alertSlot = h("div", { class: "alert-slot" });
  const pageError = h("div", { class: "inline-error", role: "alert", hidden: true, "data-testid": "page-error" });
  const resultCard = h("section", { class: "card result-card", hidden: true, "aria-labelledby": "result-title" });
  const history = historyCard();
  const stateList = h("div", { class: "state-list", "data-testid": "state" });
  const signalsSlot = h("div", { "data-testid": "pending-signals" });
  const inputSlot = h("div", { "data-testid": "workflow-input" });
  const waitSlot = h("div", { "data-testid": "wait-info" });

  const steps = stepsCard(history.events);
  const children = childrenCard();
  const output = outputCard(id);
  const approval = approvalPanel(id, () => scheduleRefresh());
  const actions = actionsCard(id, () => scheduleRefresh());
  const pause = pauseCard(id, () => scheduleRefresh());
  // A resumed run is open again: the page starts over, following its journal anew.
  const resume = resumePanel(id, () => window.location.reload());

  root.append(
    h("nav", { class: "breadcrumb", "aria-label": "Breadcrumb" },
      h("a", { href: "#/" }, "Workflows"), h("span", { "aria-hidden": "true" }, " / "),
      h("span", { class: "mono", "aria-current": "page" }, id)),
    h("header", { class: "wf-header" },
      h("div", { class: "wf-title" },
        h("h1", { class: "mono", "data-testid": "workflow-id" }, id),
        statusSlot),
      meta),
    pageError,
    alertSlot,
    approval.element,
    resume.element,
    h("div", { class: "layout" },
      h("div", { class: "col-main" },
        resultCard,
        output.element,
        steps.element,
        history.element),
      h("aside", { class: "col-side", "aria-label": "Run details and actions" },
        section("Waiting for", { id: "wait", hidden: true }, waitSlot),
        children.element,
        pause.element,
        actions.element,
        section("Published state", { id: "state" }, stateList),
        section("Pending signals", { id: "signals" }, signalsSlot),
        section("Input", { id: "input" }, inputSlot))),
  );

  // -- rendering of a DescribeWorkflowResponse --

  function render(described) {
    const run = described.workflow || {};
    const status = run.status;
    const open = OPEN_STATUSES.has(status);
    view.closed = !open;
    root.dataset.status = status || "";

    fill(statusSlot, statusBadge(status, { "data-testid": "workflow-status" }),
      run.cancel_requested && open
        ? h("span", { class: "tag tag-warn", "data-testid": "cancel-requested" }, "Cancel requested") : null,
      open ? pauseTag(described.pauses || []) : null);
    const durationEnd = run.close_time ? toMillis(run.close_time) : null;
    const created = toMillis(run.create_time);
    fill(meta,
      metaItem("Type", h("span", { class: "mono" }, run.workflow_type || "—"), "workflow-type"),
      run.parent_workflow_id ? metaItem("Parent", parentLink(run), "workflow-parent") : null,
      metaItem("Task queue", h("span", { class: "mono" }, run.task_queue || "—")),
      run.namespace ? metaItem("Namespace", h("span", { class: "mono" }, run.namespace)) : null,
      run.build_id ? metaItem("Build", h("a", { class: "mono", href: "#/workers" }, run.build_id), "workflow-build") : null,
      metaItem("Created", timeEl(run.create_time)),
      run.close_time
        ? metaItem("Closed", timeEl(run.close_time))
        : metaItem("Updated", timeEl(run.update_time)),
      metaItem(run.close_time ? "Took" : "Running for",
        durationEnd
          ? h("span", {}, fmtDuration(durationEnd - created))
          : h("span", { dataset: { since: run.create_time || "" } }, fmtDuration(Date.now() - created))),
      // The journal's size as history counts it (history_bytes), and its length.
      metaItem("Size", h("span", { title: `${run.history_bytes ?? "0"} bytes` },
        `${fmtBytes(run.history_bytes)} · ${run.event_count ?? "0"} events`), "workflow-size"),
      metaItem("Fence", h("span", { class: "mono" }, run.fence ?? "0"), "workflow-fence"),
      metaItem("Cancel requested", h("span", {}, run.cancel_requested ? "yes" : "no"), "workflow-cancel-requested"),
      ...flowItems(described.flow),
      run.trace_id ? metaItem("Trace", h("span", { class: "mono small" }, run.trace_id)) : null,
      // Where a reset's or a fork's run came from, and how much of that journal it copied.
      run.reset_from_run_id
        ? metaItem("Reset from run", h("span", { class: "mono small" }, run.reset_from_run_id), "workflow-reset-from") : null,
      run.forked_from_workflow_id
        ? metaItem("Forked from", h("a", { class: "mono small", href: `#/workflows/${encodeURIComponent(run.forked_from_workflow_id)}` },
          run.forked_from_workflow_id), "workflow-forked-from") : null,
      Number(run.copied_up_to_event_id) > 0
        ? metaItem("Copied events", h("span", {}, `1–${run.copied_up_to_event_id}`)) : null,
    );

    renderAlert(run);
    renderResult(run);
    renderWait(run, described);
    steps.update(described);
    children.update(described);
    renderState(described.state || {});
    renderSignals(described.pending_signals || []);
    if (!inputSlot.dataset.filled) {
      inputSlot.dataset.filled = "1";
      fill(inputSlot, jsonBlock(run.input ?? null));
    }
    approval.update(described, open);
    actions.update(open);
    pause.update(described);
    resume.update(status);
    tick();
  }

  // A run's flow settings and its own budget's use (docs/api.md, "Flow control").
  function flowItems(flow) {
    const settings = flow?.settings;
    if (!settings) return [];
    const budget = settings.budget;
    const amount = (usage, field) => usage?.[field] ?? "0";
    const limits = budget ? [
      budget.units !== undefined ? `${amount(flow.spent, "units")} of ${budget.units} units spent, ${amount(flow.reserved, "units")} reserved` : null,
      budget.cost_micros !== undefined ? `${amount(flow.spent, "cost_micros")} of ${budget.cost_micros} cost micros spent, ${amount(flow.reserved, "cost_micros")} reserved` : null,
    ].filter(Boolean).join("; ") : "";
    return [
      settings.keys?.length ? metaItem("Keys", h("span", { class: "mono" }, settings.keys.join(", ")), "workflow-keys") : null,
      metaItem("Priority", h("span", {}, String(settings.priority || 3)), "workflow-priority"),
      settings.fairness_key ? metaItem("Fairness key", h("span", { class: "mono" }, settings.fairness_key)) : null,
      budget ? metaItem("Budget", h("span", {}, limits + (Number(flow.refusals) > 0 ? ` (refused ${flow.refusals})` : "")), "workflow-budget") : null,
    ];
  }

  function metaItem(label, value, testid) {
    return h("div", { class: "meta-item", "data-testid": testid },
      h("dt", {}, label), h("dd", {}, value));
  }

  function renderAlert(run) {
    const failure = run.failure;
    const showFailure = failure && !OPEN_STATUSES.has(run.status) && run.status !== "WORKFLOW_STATUS_COMPLETED";
    // The reason someone gave, from the journal (the error raised into the code may not say).
    let reason = "";
    if (run.status === "WORKFLOW_STATUS_CANCELLED") {
      for (const event of history.events.values()) {
        if (event.event_type === "EVENT_TYPE_CANCEL_REQUESTED" && event.failure?.message) {
          reason = event.failure.message;
        }
      }
    }
    const key = JSON.stringify([run.status, showFailure ? failure : null, reason]);
    if (alertSlot.dataset.key === key) return;
    alertSlot.dataset.key = key;
    if (!showFailure) { fill(alertSlot); return; }
    const titles = {
      WORKFLOW_STATUS_FAILED: "The run failed",
      WORKFLOW_STATUS_PARKED: "The run is parked: it cannot safely continue",
      WORKFLOW_STATUS_CANCELLED: "The run was cancelled",
      WORKFLOW_STATUS_TERMINATED: "The run was terminated",
    };
    const kind = run.status === "WORKFLOW_STATUS_CANCELLED" || run.status === "WORKFLOW_STATUS_TERMINATED" ? "neutral" : "bad";
    fill(alertSlot, h("div", { class: `callout callout-${kind}`, "data-testid": "workflow-failure" },
      h("h2", {}, titles[run.status] || "The run ended"),
      reason ? h("p", { "data-testid": "cancel-reason" }, "Reason given: ", h("strong", {}, reason)) : null,
      failureBlock(failure)));
  }

  function renderResult(run) {
    const completed = run.status === "WORKFLOW_STATUS_COMPLETED";
    const key = completed ? JSON.stringify(run.result ?? null) : "";
    if (resultCard.dataset.key === key) return;
    resultCard.dataset.key = key;
    resultCard.hidden = !completed;
    if (!completed) { fill(resultCard); return; }
    const result = run.result ?? null;
    const report = result && typeof result === "object" && result.report
      && typeof result.report.body === "string" ? result.report : null;
    const children = [h("h2", { id: "result-title" }, "Result")];
    if (result && typeof result === "object" && typeof result.decision === "string") {
      children.push(h("p", { class: "decision", "data-testid": "result-decision" },
        h("span", { class: `tag ${result.decision === "approved" ? "tag-good" : "tag-warn"}` }, result.decision),
        result.comment ? h("span", {}, " — “", result.comment, "”") : null));
    }
    if (report) {
      children.push(h("article", {
        class: "report", "data-testid": "workflow-report", tabindex: "0",
        "aria-label": report.title ? `Report: ${report.title}` : "Report",
      }, renderReportBody(report.body)));
    }
    const json = jsonBlock(result, { "data-testid": "workflow-result" });
    children.push(report
      ? h("details", { class: "result-json" }, h("summary", {}, "Result as JSON"), json)
      : json);
    fill(resultCard, ...children);
  }

  function renderWait(run, described) {
    const card = $("#wait", root);
    const wait = OPEN_STATUSES.has(run.status) ? run.wait : null;
    card.hidden = !wait;
    if (!wait) { fill(waitSlot); return; }
    const until = wait.until
      ? h("span", {}, " until ", timeEl(wait.until), " (",
        h("span", { dataset: { countdown: wait.until, countdownPrefix: "in " } }, ""), ")")
      : h("span", { class: "muted" }, wait.kind === "WAIT_KIND_SIGNAL" || wait.kind === "WAIT_KIND_APPROVAL" ? " (no timeout)" : "");
    fill(waitSlot,
      h("p", { class: "wait-line" },
        h("span", { class: "tag tag-wait" }, enumLabel(wait.kind, "WAIT_KIND_")), " ",
        h("span", { "data-testid": "wait-text" }, waitText(wait)), until),
      described.current_step
        ? h("p", { class: "muted small" }, "Current step: ", h("span", { class: "mono" }, described.current_step))
        : null,
    );
  }

  const stateItems = new Map();

  function renderState(stateMap) {
    const keys = Object.keys(stateMap).sort();
    if (keys.length === 0) {
      fill(stateList, h("p", { class: "muted" }, "Nothing published yet (ctx.set_state)."));
      stateItems.clear();
      return;
    }
    if (stateItems.size === 0) fill(stateList);
    for (const key of keys) {
      const value = stateMap[key];
      const signature = JSON.stringify(value ?? null);
      let entry = stateItems.get(key);
      if (entry && entry.signature === signature) continue;
      const element = h("div", { class: "state-item", "data-testid": `state-${key}`, "data-key": key },
        h("h3", { class: "mono" }, key), jsonBlock(value ?? null));
      if (entry) entry.element.replaceWith(element);
      entry = { element, signature };
      stateItems.set(key, entry);
    }
    for (const [key, entry] of stateItems) {
      if (!(key in stateMap)) { entry.element.remove(); stateItems.delete(key); }
    }
    arrange(stateList, keys.map((key) => stateItems.get(key).element));
  }

  function renderSignals(signals) {
    const key = JSON.stringify(signals);
    if (signalsSlot.dataset.key === key) return;
    signalsSlot.dataset.key = key;
    if (signals.length === 0) {
      fill(signalsSlot, h("p", { class: "muted" }, "None: every signal that arrived was consumed."));
      return;
    }
    fill(signalsSlot, h("ul", { class: "signal-list" }, signals.map((s) =>
      h("li", { "data-testid": "pending-signal" },
        h("div", {}, h("strong", { class: "mono" }, s.name), " ",
          h("span", { class: "muted small" }, "event ", s.event_id, " · ", timeEl(s.receive_time)),
          s.signal_id ? h("span", { class: "muted small" }, " · id ", s.signal_id) : null),
        jsonBlock(s.payload ?? null)))));
  }

  // -- describe: on load, on each event (debounced), and every few seconds while open --

  async function refresh() {
    if (view.inflight) { view.again = true; return; }
    view.inflight = true;
    try {
      const described = await api("GET", workflowPath(id), { signal });
      pageError.hidden = true;
      render(described);
    } catch (error) {
      if (isAbort(error)) return;
      if (error instanceof ApiError && error.status === 404) {
        controller.abort();
        fill(root,
          h("nav", { class: "breadcrumb", "aria-label": "Breadcrumb" }, h("a", { href: "#/" }, "Workflows")),
          h("h1", { class: "mono" }, id),
          h("div", { class: "callout callout-bad", role: "alert", "data-testid": "not-found" },
            h("p", {}, h("strong", {}, "No such run. "), error.message),
            h("p", {}, settings.namespace ? `Namespace: ${settings.namespace}. ` : "",
              h("a", { href: "#/" }, "Back to the list"))));
        return;
      }
      fill(pageError, h("strong", {}, "Could not load the run. "), errorText(error));
      pageError.hidden = false;
    } finally {
      view.inflight = false;
      if (view.again && !signal.aborted) { view.again = false; refresh(); }
    }
  }

  const scheduleRefresh = debounce(refresh, DESCRIBE_DEBOUNCE_MS);

  function tick() {
    const now = Date.now();
    for (const el of root.querySelectorAll("[data-countdown]")) {
      const left = (toMillis(el.dataset.countdown) - now) / 1000;
      const text = left > 0.05
        ? `${el.dataset.countdownPrefix ?? ""}${fmtSeconds(left)}`
        : el.dataset.countdownDone ?? "due now";
      if (el.textContent !== text) el.textContent = text;
    }
    for (const el of root.querySelectorAll("[data-since]")) {
      if (!el.dataset.since) continue;
      const text = `${el.dataset.sincePrefix ?? ""}${fmtDuration(now - toMillis(el.dataset.since))}`;
      if (el.textContent !== text) el.textContent = text;
    }
  }

  refresh();
  followEvents(id, {
    signal,
    onEvent(event) { history.add(event); scheduleRefresh(); },
    onStatus() { scheduleRefresh(); },
    onEnd() { scheduleRefresh(); },
    onState: history.setLive,
  });
  output.follow(signal);
  const ticker = setInterval(tick, 1000);
  const poller = setInterval(() => {
    if (!document.hidden && !view.closed) refresh();
  }, DESCRIBE_POLL_MS);

  return {
    unmount() {
      clearInterval(ticker);
      clearInterval(poller);
      scheduleRefresh.cancel();
      controller.abort();
    },
  };
}
