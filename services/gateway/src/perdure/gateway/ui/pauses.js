// Pauses (AdminService.Pause, /v1/pauses): what holds a run back from its workers, as a tag
// for the list and a card for the run's page, where an operator pauses and unpauses the run,
// and the workers page's section of every pause, where types and queues are paused.

import { api, errorText } from "./api.js";
import { fill, h, section, toast } from "./dom.js";
import { messageRegion, withBusy } from "./forms.js";
import { OPEN_STATUSES, timeEl } from "./format.js";

const SCOPE_WORDS = {
  PAUSE_SCOPE_WORKFLOW: "this run",
  PAUSE_SCOPE_WORKFLOW_TYPE: "its workflow type",
  PAUSE_SCOPE_TASK_QUEUE: "its task queue",
};

/** The pauses (of GET /v1/pauses) that hold an open run of the list. */
export function pausesOf(run, pauses) {
  if (!OPEN_STATUSES.has(run.status)) return [];
  const names = {
    PAUSE_SCOPE_WORKFLOW: run.workflow_id,
    PAUSE_SCOPE_WORKFLOW_TYPE: run.workflow_type,
    PAUSE_SCOPE_TASK_QUEUE: run.task_queue,
  };
  return pauses.filter((pause) => names[pause.scope] === pause.name);
}

/** "paused (its task queue)": the tag of a run some pause holds; null when none does. */
export function pauseTag(pauses) {
  if (!pauses.length) return null;
  const by = pauses.map((pause) => SCOPE_WORDS[pause.scope] || pause.scope).join(", ");
  return h("span", { class: "tag tag-warn", "data-testid": "paused-tag", title: `Paused by ${by}` },
    `paused (${by})`);
}

/** The Pause card of an open run: what holds it, and the button that pauses or unpauses it
 * (its own pause; a type's or queue's is lifted with `perdure unpause`). */
export function pauseCard(id, changed) {
  const holders = h("ul", { class: "plain", "data-testid": "pause-holders" });
  const state = h("p", { class: "muted", "data-testid": "pause-state" });
  const button = h("button", { type: "button", class: "btn", "data-testid": "pause-button" }, "Pause run");
  const message = messageRegion("pause-message");
  let own = false;
  button.addEventListener("click", async () => {
    message.clear();
    await withBusy(button, async () => {
      try {
        await api("POST", own ? "/v1/pauses/unpause" : "/v1/pauses", { body: { workflow_id: id } });
        const text = own ? "Run unpaused: its waiting tasks go to workers at once." : "Run paused: no worker gets it until it is unpaused.";
        message.ok(text);
        toast(text);
        changed();
      } catch (error) {
        message.error(error);
      }
    });
  });
  const element = h("section", { class: "card", id: "pause", "aria-labelledby": "pause-title", "data-testid": "pause-card" },
    h("h2", { id: "pause-title" }, "Pause"),
    state, holders, h("div", { class: "row" }, button), message.element);
  return {
    element,
    update(described) {
      const open = OPEN_STATUSES.has(described.workflow?.status);
      element.hidden = !open;
      const pauses = described.pauses || [];
      own = pauses.some((pause) => pause.scope === "PAUSE_SCOPE_WORKFLOW");
      state.textContent = pauses.length
        ? "Paused: no new task of this run goes to a worker (one already running finishes)."
        : "Not paused.";
      fill(holders, ...pauses.map((pause) => h("li", {},
        `By ${SCOPE_WORDS[pause.scope] || pause.scope} (${pause.name})`,
        pause.reason ? ` — ${pause.reason}` : "")));
      button.textContent = own ? "Unpause run" : "Pause run";
    },
  };
}

const SCOPE_FIELDS = {
  PAUSE_SCOPE_WORKFLOW: "workflow_id",
  PAUSE_SCOPE_WORKFLOW_TYPE: "workflow_type",
  PAUSE_SCOPE_TASK_QUEUE: "task_queue",
};

/** The Pauses section of the workers page: the pauses in force, each with its Unpause button,
 * and a form that pauses a workflow type or a task queue; `changed()` after either. */
export function pausesSection(pauses, changed) {
  const send = async (path, body, text) => {
    try {
      await api("POST", path, { body });
      toast(text);
      changed();
    } catch (error) {
      toast(errorText(error), "error");
    }
  };
  const rows = pauses.map((pause) => {
    const target = { [SCOPE_FIELDS[pause.scope]]: pause.name };
    const unpause = h("button", { type: "button", class: "btn", "data-testid": "unpause-button" }, "Unpause");
    unpause.addEventListener("click", () => send("/v1/pauses/unpause", target, `${pause.name}: unpaused`));
    return h("tr", { "data-testid": "pause-row" },
      h("td", {}, SCOPE_WORDS[pause.scope]?.replace(/^(this|its) /, "") ?? pause.scope),
      h("td", { class: "mono" }, pause.name), h("td", {}, timeEl(pause.pause_time)),
      h("td", {}, pause.reason || "—"), h("td", { class: "mono" }, pause.paused_by || "—"),
      h("td", {}, unpause));
  });
  const scope = h("select", { id: "pause-scope", name: "scope" },
    h("option", { value: "workflow_type" }, "Workflow type"),
    h("option", { value: "task_queue" }, "Task queue"));
  const name = h("input", { id: "pause-name", type: "text", required: true, autocomplete: "off", spellcheck: "false", placeholder: "name" });
  const reason = h("input", { id: "pause-reason", type: "text", autocomplete: "off", placeholder: "why (optional)" });
  const form = h("form", { class: "row", "data-testid": "pause-form" },
    h("label", { for: "pause-scope" }, "Pause"), scope, name,
    h("label", { for: "pause-reason" }, "Reason"), reason,
    h("button", { type: "submit", class: "btn btn-warn" }, "Pause"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const body = { [scope.value]: name.value.trim(), reason: reason.value };
    send("/v1/pauses", body, `${name.value.trim()}: paused`);
  });
  return section("Pauses", { id: "pauses" },
    h("p", { class: "hint" }, "Nothing a pause holds is granted to a worker; tasks already running finish."),
    rows.length
      ? h("div", { class: "table-wrap" }, h("table", { class: "runs", "data-testid": "pauses-table" },
        h("thead", {}, h("tr", {}, ["Scope", "Name", "Since", "Reason", "By", ""].map((title) => h("th", { scope: "col" }, title)))),
        h("tbody", {}, rows)))
      : h("p", { class: "muted", "data-testid": "pauses-table-empty" }, "None."),
    form);
}
