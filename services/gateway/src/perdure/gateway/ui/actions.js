// What someone can do to a run from its page: the actions card (send a signal, cancel,
// terminate) and the resume panel of a parked run (the approval panel is approvals.js's).

import { api, workflowPath } from "./api.js";
import { h, toast } from "./dom.js";
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

