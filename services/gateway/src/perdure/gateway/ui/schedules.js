// The schedules page (#/schedules): every schedule of the namespace with its spec, the run type
// it starts, its overlap policy, whether it is paused, its next slot and its counts, and the
// actions pause, unpause, trigger now and delete (operator key). Refreshed every few seconds.

import { api, errorText } from "./api.js";
import { enc, fill, h, isAbort, toast } from "./dom.js";
import { enumLabel, timeEl } from "./format.js";

const REFRESH_MS = 3000;

const seconds = (duration) => Number.parseFloat(duration ?? "0");

function specText(spec) {
  if (spec?.cron) return `cron ${spec.cron}`;
  const offset = seconds(spec?.offset);
  return `every ${seconds(spec?.interval)} s${offset ? ` (+${offset} s)` : ""}`;
}

function lastRun(schedule) {
  const last = schedule.recent_actions?.[0];
  if (!last) return h("span", { class: "muted" }, "—");
  return h("a", { href: `#/workflows/${enc(last.workflow_id)}` }, last.workflow_id);
}

function actionButtons(info, reload) {
  const id = info.schedule.schedule_id;
  const path = `/v1/schedules/${enc(id)}`;
  const run = async (button, what, done) => {
    button.disabled = true;
    try {
      const answer = await api("POST", `${path}/${what}`, { body: {} });
      toast(done(answer));
      reload();
    } catch (error) {
      toast(errorText(error), "error");
    } finally {
      button.disabled = false;
    }
  };
  const paused = info.schedule.paused;
  const toggle = h("button", { type: "button", class: "btn", "data-testid": `schedule-${paused ? "unpause" : "pause"}` },
    paused ? "Unpause" : "Pause");
  toggle.addEventListener("click", () =>
    run(toggle, paused ? "unpause" : "pause", () => `${id}: ${paused ? "unpaused" : "paused"}`));
  const trigger = h("button", { type: "button", class: "btn", "data-testid": "schedule-trigger" }, "Trigger now");
  trigger.addEventListener("click", () =>
    run(trigger, "trigger", (answer) => `${id}: started ${answer.action?.workflow_id ?? "a run"}`));
  // Deleting asks once more in place: the first click arms the button.
  const remove = h("button", { type: "button", class: "btn btn-bad-outline", "data-testid": "schedule-delete" }, "Delete…");
  remove.addEventListener("click", () => {
    if (remove.dataset.armed !== "yes") {
      remove.dataset.armed = "yes";
      remove.className = "btn btn-bad";
      remove.textContent = "Confirm delete";
      return;
    }
    run(remove, "delete", () => `${id}: deleted (its runs stay)`);
  });
  return h("div", { class: "row" }, toggle, trigger, remove);
}

function scheduleRow(info, reload) {
  const s = info.schedule;
  const state = s.paused
    ? h("span", { title: s.note || "" }, "Paused", s.note ? h("span", { class: "muted" }, ` (${s.note})`) : null)
    : "Active";
  return h("tr", { "data-testid": "schedule-row", "data-schedule-id": s.schedule_id },
    h("td", {}, s.schedule_id),
    h("td", { class: "mono nowrap" }, specText(s.spec)),
    h("td", {}, s.action?.workflow_type ?? "—"),
    h("td", {}, enumLabel(s.overlap_policy, "SCHEDULE_OVERLAP_POLICY_")),
    h("td", { "data-testid": "schedule-state" }, state),
    h("td", {}, timeEl(info.next_fire_times?.[0])),
    h("td", { "data-testid": "schedule-runs" }, String(info.action_count ?? 0)),
    h("td", {}, `${info.skipped_count ?? 0} / ${info.missed_count ?? 0}`),
    h("td", {}, lastRun(info)),
    h("td", {}, actionButtons(info, reload)));
}

function scheduleTable(schedules, reload) {
  if (!schedules.length) {
    return h("p", { class: "muted", "data-testid": "schedules-empty" },
      "No schedules in this namespace. Create one with ",
      h("code", {}, "perdure schedule create"), " or POST /v1/schedules.");
  }
  const headers = ["Schedule", "Spec (UTC)", "Workflow type", "Overlap", "State", "Next slot",
    "Runs", "Skipped / missed", "Last run", "Actions"];
  return h("div", { class: "table-wrap" },
    h("table", { class: "runs", "data-testid": "schedules-table" },
      h("thead", {}, h("tr", {}, headers.map((title) => h("th", { scope: "col" }, title)))),
      h("tbody", {}, schedules.map((info) => scheduleRow(info, reload)))));
}

export function schedulesView(root) {
  const controller = new AbortController();
  const body = h("div", { "data-testid": "schedules-body" });
  const errorBox = h("div", { class: "inline-error", role: "alert", hidden: true, "data-testid": "schedules-error" });
  let inflight = false;

  async function load() {
    inflight = true;
    try {
      const schedules = [];
      let token = "";
      do {
        const page = await api("GET", "/v1/schedules", {
          params: { page_token: token }, signal: controller.signal,
        });
        schedules.push(...(page.schedules ?? []));
        token = page.next_page_token ?? "";
      } while (token);
      errorBox.hidden = true;
      fill(body, scheduleTable(schedules, load));
    } catch (error) {
      if (isAbort(error)) return;
      errorBox.textContent = errorText(error);
      errorBox.hidden = false;
    } finally {
      inflight = false;
    }
  }

  fill(root, h("h1", {}, "Schedules"),
    h("p", { class: "hint" }, "Each slot starts one run, named after the schedule and the slot time. Paused schedules skip their slots; trigger starts a run now whatever the overlap policy; deleting a schedule leaves its runs."),
    errorBox, body);
  load();
  const timer = setInterval(() => {
    const armed = root.querySelector("[data-armed=yes]");
    if (!document.hidden && !inflight && !armed) load();
  }, REFRESH_MS);
  return {
    unmount() {
      clearInterval(timer);
      controller.abort();
    },
  };
}
