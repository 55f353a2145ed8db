// What someone can do to a run from its page: the approval panel (approve or reject a run
// waiting for approval), the actions card (send a signal, cancel, terminate) and the resume
// panel of a parked run.

import { api, workflowPath } from "./api.js";
import { fill, h, toast } from "./dom.js";
import { jsonBlock } from "./format.js";
import { field, messageRegion, parseJsonField, required, withBusy } from "./forms.js";

/** Send an action with its button busy: the text `send` resolves to goes under the form and
 * into a toast and the run is refreshed (`changed`); an error goes under the form. */
async function act(button, message, changed, send) {
  await withBusy(button, async () => {
    try {
      const text = await send();
      message.ok(text);
      toast(text);
      changed();
    } catch (error) {
      message.error(error);
    }
  });
}

/** A fresh signal id: crypto.randomUUID() where the page is a secure context (HTTPS or
 * localhost), else a version 4 UUID from getRandomValues, which every page has. */
function newSignalId() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[6] = (bytes[6] & 0x0f) | 0x40;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  const hex = [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The approval panel, shown while the run waits for the "approval" signal; `changed()`
 * after a decision is sent. */
export function approvalPanel(id, changed) {
  const comment = h("textarea", { id: "approval-comment", rows: "2", placeholder: "Why (kept in the journal and the report)" });
  const message = messageRegion("approval-message");
  const recommendation = h("div", { class: "recommendation", "data-testid": "approval-recommendation" });
  const ignored = h("p", { class: "form-msg form-msg-error", hidden: true, "data-testid": "approval-ignored" });
  const approve = h("button", { type: "submit", class: "btn btn-good", value: "approved" }, "Approve");
  const reject = h("button", { type: "submit", class: "btn btn-bad-outline", value: "rejected" }, "Reject");
  let sentFor = "";
  // One signal id per decision: sending the same decision again (its answer was lost, say)
  // sends the same id, so the run applies it once; another decision or comment is a new one.
  let unconfirmed = null;
  const form = h("form", { class: "approval-form" },
    field("approval-comment", "Comment", comment),
    h("div", { class: "row" }, approve, reject));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const button = event.submitter ?? approve;
    const decision = button.value;
    message.clear();
    const text = comment.value;
    if (unconfirmed?.decision !== decision || unconfirmed?.comment !== text) {
      unconfirmed = { decision, comment: text, signalId: newSignalId() };
    }
    const body = { decision, comment: text, signal_id: unconfirmed.signalId };
    await act(button, message, changed, async () => {
      const answer = await api("POST", workflowPath(id, "/approve"), { body });
      unconfirmed = null;
      sentFor = element.dataset.key || "";
      comment.value = "";
      if (answer.accepted === false) return "This decision had already reached the run: it counts once.";
      return decision === "approved" ? "Approval sent. The run continues." : "Rejection sent.";
    });
  });
  const element = h("section", {
    class: "card approval-card", hidden: true, "aria-labelledby": "approval-title", "data-testid": "approval-panel",
  },
  h("div", { class: "approval-head" },
    h("h2", { id: "approval-title" }, "Approval needed"),
    h("p", { class: "muted" }, "The run is suspended until someone decides. No worker holds it meanwhile.")),
  recommendation, ignored, form, message.element);

  return {
    element,
    update(described, open) {
      const state = described.state || {};
      const waiting = state.waiting_for;
      const needed = open && waiting && typeof waiting === "object" && waiting.signal === "approval";
      const wasHidden = element.hidden;
      element.hidden = !needed;
      if (!needed) {
        if (!wasHidden) message.clear();
        return;
      }
      const key = JSON.stringify([waiting, state.recommendation ?? null]);
      if (element.dataset.key !== key) {
        element.dataset.key = key;
        const rec = state.recommendation;
        fill(recommendation);
        if (rec && typeof rec === "object" && rec.recommendation) {
          recommendation.append(
            h("p", { class: "rec-text" }, rec.recommendation),
            h("p", { class: "muted small" },
              rec.confidence !== undefined ? `Confidence ${rec.confidence}` : "",
              rec.rationale ? ` · ${rec.rationale}` : ""));
        } else if (rec !== undefined) {
          recommendation.append(jsonBlock(rec));
        }
        ignored.hidden = !waiting.last_signal_ignored;
        ignored.textContent = waiting.last_signal_ignored
          ? `The last approval signal was ignored: ${waiting.last_signal_ignored}` : "";
        if (sentFor && sentFor !== key) message.clear();
      }
    },
  };
}

/** The resume panel, shown while the run is parked: once the fixed code is deployed, an
 * operator opens the run again and a worker replays it; `resumed()` after it is. */
export function resumePanel(id, resumed) {
  const reason = h("input", { id: "resume-reason", type: "text", autocomplete: "off", placeholder: "why (kept in the journal)" });
  const message = messageRegion("resume-message");
  const form = h("form", { class: "stack-sm" },
    field("resume-reason", "Reason", reason),
    h("div", { class: "row" }, h("button", { type: "submit", class: "btn btn-good", "data-testid": "resume-button" }, "Resume run")),
    message.element);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    message.clear();
    await act(event.submitter, message, resumed, async () => {
      await api("POST", workflowPath(id, "/resume"), { body: { reason: reason.value } });
      return "Run resumed: a worker replays it with the code it runs now.";
    });
  });
  const element = h("section", {
    class: "card", id: "resume", hidden: true, "aria-labelledby": "resume-title", "data-testid": "resume-panel",
  },
  h("h2", { id: "resume-title" }, "Resume"),
  h("p", { class: "muted" },
    "Deploy the fixed code first: the run replays from its start and goes on where it stopped. ",
    "Nothing recorded runs again."),
  form);
  return {
    element,
    update(status) {
      element.hidden = status !== "WORKFLOW_STATUS_PARKED";
    },
  };
}

/** The Actions card of an open run; `changed()` after an action is taken. */
export function actionsCard(id, changed) {
  // Send a signal.
  const signalName = h("input", { id: "signal-name", type: "text", required: true, autocomplete: "off", spellcheck: "false", placeholder: "approval" });
  const signalPayload = h("textarea", { id: "signal-payload", rows: "3", spellcheck: "false", class: "mono", "aria-describedby": "signal-payload-help" }, "{}");
  const signalId = h("input", { id: "signal-id", type: "text", autocomplete: "off", spellcheck: "false", placeholder: "optional, for deduplication" });
  const signalMsg = messageRegion("signal-message");
  const signalForm = h("form", { class: "stack-sm", "aria-labelledby": "signal-title" },
    h("h3", { id: "signal-title" }, "Send a signal"),
    field("signal-name", "Signal name", signalName),
    field("signal-payload", "Payload (JSON)", signalPayload,
      h("span", { id: "signal-payload-help", class: "hint" }, "Any JSON value; empty means null.")),
    field("signal-id", "Signal ID", signalId),
    h("div", { class: "row" }, h("button", { type: "submit", class: "btn" }, "Send signal")),
    signalMsg.element);
  signalForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    signalMsg.clear();
    if (!required(signalName, signalMsg, "Give the signal a name.")) return;
    const name = signalName.value.trim();
    const parsed = parseJsonField(signalPayload);
    if (!parsed.ok) { signalMsg.error(`The payload is not valid JSON: ${parsed.error}`); signalPayload.focus(); return; }
    await act(event.submitter, signalMsg, changed, async () => {
      const body = { signal_name: name, payload: parsed.value };
      if (signalId.value.trim()) body.signal_id = signalId.value.trim();
      const answer = await api("POST", workflowPath(id, "/signals"), { body });
      return answer.accepted === false
        ? `Signal “${name}” was already received with this ID: ignored.`
        : `Signal “${name}” sent.`;
    });
  });

  // Cancel.
  const cancelReason = h("input", { id: "cancel-reason", type: "text", autocomplete: "off", placeholder: "why (kept in the journal)" });
  const cancelMsg = messageRegion("cancel-message");
  const cancelForm = h("form", { class: "stack-sm", "aria-labelledby": "cancel-title" },
    h("h3", { id: "cancel-title" }, "Cancel"),
    h("p", { class: "hint" }, "The code gets a cancellation at its next durable call and may run compensations."),
    field("cancel-reason", "Cancellation reason", cancelReason),
    h("div", { class: "row" }, h("button", { type: "submit", class: "btn btn-warn" }, "Cancel run")),
    cancelMsg.element);
  cancelForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    cancelMsg.clear();
    await act(event.submitter, cancelMsg, changed, async () => {
      await api("POST", workflowPath(id, "/cancel"), { body: { reason: cancelReason.value } });
      return "Cancellation requested.";
    });
  });

  // Terminate, with a confirmation step.
  const terminateReason = h("input", { id: "terminate-reason", type: "text", autocomplete: "off", placeholder: "why (kept in the journal)" });
  const terminateMsg = messageRegion("terminate-message");
  const terminateAsk = h("button", { type: "button", class: "btn btn-bad-outline" }, "Terminate…");
  const terminateYes = h("button", { type: "submit", class: "btn btn-bad" }, "Yes, terminate now");
  const terminateNo = h("button", { type: "button", class: "btn" }, "Keep it running");
  const confirmRow = h("div", { class: "confirm", hidden: true, role: "group", "aria-labelledby": "terminate-confirm-text" },
    h("p", { id: "terminate-confirm-text" }, h("strong", {}, "Terminate this run?"),
      " It ends at once as TERMINATED and runs no more code, not even compensations."),
    h("div", { class: "row" }, terminateYes, terminateNo));
  const terminateForm = h("form", { class: "stack-sm", "aria-labelledby": "terminate-title" },
    h("h3", { id: "terminate-title" }, "Terminate"),
    field("terminate-reason", "Termination reason", terminateReason),
    h("div", { class: "row" }, terminateAsk),
    confirmRow,
    terminateMsg.element);
  const confirming = (yes) => {
    confirmRow.hidden = !yes;
    terminateAsk.hidden = yes;
    (yes ? terminateYes : terminateAsk).focus();
  };
  terminateAsk.addEventListener("click", () => { terminateMsg.clear(); confirming(true); });
  terminateNo.addEventListener("click", () => confirming(false));
  terminateForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (confirmRow.hidden) { confirming(true); return; }
    terminateMsg.clear();
    await act(terminateYes, terminateMsg, changed, async () => {
      await api("POST", workflowPath(id, "/terminate"), { body: { reason: terminateReason.value } });
      confirmRow.hidden = true;
      terminateAsk.hidden = false;
      return "Run terminated.";
    });
  });

  const closedNote = h("p", { class: "muted", hidden: true, "data-testid": "actions-closed" },
    "The run is closed: it takes no more signals, cancellation or termination.");
  const forms = h("div", { class: "actions-forms" }, signalForm, h("hr"), cancelForm, h("hr"), terminateForm);
  const element = h("section", { class: "card", id: "actions", "aria-labelledby": "actions-title", "data-testid": "actions" },
    h("h2", { id: "actions-title" }, "Actions"), closedNote, forms);

  return {
    element,
    update(open) {
      // A closed run takes no more actions: the card goes (what was just done stays in the
      // toasts and the history).
      element.hidden = !open;
      closedNote.hidden = open;
      forms.hidden = !open;
    },
  };
}

