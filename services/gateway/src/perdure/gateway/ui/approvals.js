// Approvals (ApprovalService, /v1/approvals): the inbox page (#/approvals) of the pending
// approvals of every run, and the run page's approval panel. A decision names the SHA-256 of
// the details it was shown: details that changed since are refused (APPROVAL_DETAILS_CHANGED),
// and an approval is decided once (APPROVAL_DECIDED).

import { api, errorText } from "./api.js";
import { enc, fill, h, isAbort, toast } from "./dom.js";
import { jsonBlock, timeEl } from "./format.js";
import { field, messageRegion, withBusy } from "./forms.js";

const REFRESH_MS = 3000;

/** POST the decision on `approval` as shown; the text to show. */
async function decide(approval, approve, reason) {
  try {
    await api("POST", `/v1/approvals/${enc(approval.approval_id)}/decide`, {
      body: { approve, reason, details_sha256: approval.details_sha256 },
    });
  } catch (error) {
    if (error.reason === "APPROVAL_DECIDED") return "This approval was decided already: a decision counts once.";
    throw error;
  }
  return approve ? "Approved. The run continues." : "Rejected.";
}

/** What is to be approved: a recommendation as text, anything else as JSON. */
function detailsView(details) {
  const rec = details?.recommendation;
  if (rec && typeof rec === "object" && rec.recommendation) {
    return h("div", { class: "recommendation", "data-testid": "approval-recommendation" },
      h("p", { class: "rec-text" }, rec.recommendation),
      h("p", { class: "muted small" },
        rec.confidence !== undefined ? `Confidence ${rec.confidence}` : "",
        rec.rationale ? ` · ${rec.rationale}` : ""));
  }
  return h("div", { class: "recommendation", "data-testid": "approval-recommendation" }, jsonBlock(details));
}

/** A form with a reason and the Approve and Reject buttons; `changed()` after a decision. */
function decisionForm(approval, prefix, changed) {
  const reason = h("textarea", { id: `${prefix}-reason`, rows: "2", placeholder: "Why (recorded with the decision and audited)" });
  const message = messageRegion(`${prefix}-message`);
  const approve = h("button", { type: "submit", class: "btn btn-good", value: "approve", "data-testid": "approval-approve" }, "Approve");
  const reject = h("button", { type: "submit", class: "btn btn-bad-outline", value: "reject", "data-testid": "approval-reject" }, "Reject");
  const form = h("form", { class: "approval-form" },
    field(`${prefix}-reason`, "Reason", reason),
    h("div", { class: "row" }, approve, reject));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const button = event.submitter ?? approve;
    message.clear();
    await withBusy(button, async () => {
      try {
        const text = await decide(approval, button.value === "approve", reason.value);
        reason.value = "";
        message.ok(text);
        toast(text);
        changed();
      } catch (error) {
        message.error(error);
      }
    });
  });
  return h("div", {}, form, message.element);
}

function deciders(approval) {
  const approvers = approval.approvers?.length ? approval.approvers.join(", ") : "any operator";
  const escalated = approval.escalated_time;
  const more = approval.escalate_to?.length ? approval.escalate_to.join(", ") : "";
  if (escalated && more) return `Escalated: ${approvers} or ${more} may decide`;
  return `${approvers} may decide${more ? ` (${more} once escalated)` : ""}`;
}

/** The approval panel of a run's page, shown while the run waits for an approval. */
export function approvalPanel(id, changed) {
  const body = h("div", { "data-testid": "approval-body" });
  const element = h("section", {
    class: "card approval-card", hidden: true, "aria-labelledby": "approval-title", "data-testid": "approval-panel",
  },
  h("div", { class: "approval-head" },
    h("h2", { id: "approval-title" }, "Approval needed"),
    h("p", { class: "muted" }, "The run is suspended until someone decides. No worker holds it meanwhile.")),
  body);
  return {
    element,
    update(described, open) {
      const pending = open ? described.pending_approvals ?? [] : [];
      element.hidden = !pending.length;
      const key = pending.map((a) => a.approval_id + (a.escalated_time ?? "")).join(",");
      if (element.dataset.key === key) return;
      element.dataset.key = key;
      fill(body, ...pending.map((approval, n) => h("div", { class: "stack-sm", "data-approval-id": approval.approval_id },
        h("p", {}, h("strong", {}, approval.name), " · ", h("span", { class: "muted small" },
          deciders(approval), " · expires ", timeEl(approval.expire_time))),
        detailsView(approval.details),
        decisionForm(approval, `approval-${n}`, changed))));
    },
  };
}

function approvalRow(approval, reload) {
  return h("tr", { "data-testid": "approval-row", "data-approval-id": approval.approval_id },
    h("td", {}, h("a", { href: `#/workflows/${enc(approval.workflow_id)}` }, approval.workflow_id)),
    h("td", {}, approval.name),
    h("td", {}, detailsView(approval.details)),
    h("td", { class: "small" }, deciders(approval)),
    h("td", {}, timeEl(approval.create_time)),
    h("td", {}, timeEl(approval.expire_time)),
    h("td", {}, decisionForm(approval, `inbox-${approval.approval_id}`, reload)));
}

/** The inbox page (#/approvals): every pending approval of the namespace, newest first. */
export function approvalsView(root) {
  const controller = new AbortController();
  const body = h("div", { "data-testid": "approvals-body" });
  const errorBox = h("div", { class: "inline-error", role: "alert", hidden: true, "data-testid": "approvals-error" });
  let inflight = false;
  let shown = "";

  async function load() {
    inflight = true;
    try {
      const approvals = [];
      let token = "";
      do {
        const page = await api("GET", "/v1/approvals", {
          params: { status: "pending", page_token: token }, signal: controller.signal,
        });
        approvals.push(...(page.approvals ?? []));
        token = page.next_page_token ?? "";
      } while (token);
      errorBox.hidden = true;
      const key = approvals.map((a) => a.approval_id + (a.escalated_time ?? "")).join(",");
      if (key === shown) return; // keep what someone is typing
      shown = key;
      if (!approvals.length) {
        fill(body, h("p", { class: "muted", "data-testid": "approvals-empty" }, "No approval waits for a decision."));
        return;
      }
      const headers = ["Workflow", "Approval", "Details", "Who may decide", "Asked", "Expires", "Decision"];
      fill(body, h("div", { class: "table-wrap" },
        h("table", { class: "runs", "data-testid": "approvals-table" },
          h("thead", {}, h("tr", {}, headers.map((title) => h("th", { scope: "col" }, title)))),
          h("tbody", {}, approvals.map((approval) => approvalRow(approval, load))))));
    } catch (error) {
      if (isAbort(error)) return;
      errorBox.textContent = errorText(error);
      errorBox.hidden = false;
    } finally {
      inflight = false;
    }
  }

  fill(root, h("h1", {}, "Approvals"),
    h("p", { class: "hint" }, "Runs waiting for a person's decision. Each approval is decided once, on the details shown here; it expires undecided at its time."),
    errorBox, body);
  load();
  const timer = setInterval(() => {
    if (!document.hidden && !inflight) load();
  }, REFRESH_MS);
  return {
    unmount() {
      clearInterval(timer);
      controller.abort();
    },
  };
}
