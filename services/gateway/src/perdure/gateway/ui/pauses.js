// Pauses (AdminService.Pause, /v1/pauses): what holds a run back from its workers, as a tag
// for the list and a card for the run's page, where an operator pauses and unpauses the run.

import { api } from "./api.js";
import { fill, h, toast } from "./dom.js";
import { messageRegion, withBusy } from "./forms.js";
import { OPEN_STATUSES } from "./format.js";

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
