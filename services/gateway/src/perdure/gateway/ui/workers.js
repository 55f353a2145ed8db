// The workers page (#/workers): the worker sessions connected now with their builds, the builds
// seen on each task queue with the open runs each still holds (an old build can stop once it
// holds none of a pinned type), the workflow types' routing policies and the pauses in force.
// Refreshed every few seconds; setting a policy or a pause needs an operator key.

import { api, errorText } from "./api.js";
import { fill, h, isAbort, section, toast } from "./dom.js";
import { timeEl } from "./format.js";
import { pausesSection } from "./pauses.js";

const REFRESH_MS = 3000;
const POLICIES = {
  ROUTING_POLICY_PINNED: "pinned",
  ROUTING_POLICY_AUTO_UPGRADE: "auto-upgrade",
  ROUTING_POLICY_UNVERSIONED: "unversioned",
};

function table(testid, headers, rows) {
  if (!rows.length) return h("p", { class: "muted", "data-testid": `${testid}-empty` }, "None.");
  return h("div", { class: "table-wrap" },
    h("table", { class: "runs", "data-testid": testid },
      h("thead", {}, h("tr", {}, headers.map((title) => h("th", { scope: "col" }, title)))),
      h("tbody", {}, rows.map((cells) => h("tr", {}, cells.map((cell) => h("td", {}, cell)))))));
}

const list = (values) => (values?.length ? values.join(", ") : "—");

function workerRows(workers) {
  return workers.map((w) => [
    w.task_queue, w.build_id || "—", w.identity, list(w.workflow_types), list(w.step_types),
    `${w.tasks_in_flight ?? 0}/${w.capacity ?? 0}`,
  ]);
}

function buildRows(builds) {
  return builds.map((b) => [
    b.task_queue, b.build_id || "—", timeEl(b.first_seen_time), timeEl(b.last_seen_time),
    String(b.connected_workers ?? 0), String(b.open_runs ?? 0), String(b.pinned_runs ?? 0),
    list(b.newest_for),
  ]);
}

function policyForm(onSet) {
  const type = h("input", { id: "policy-type", name: "workflow_type", type: "text", required: true,
    autocomplete: "off", spellcheck: "false", placeholder: "workflow type" });
  const policy = h("select", { id: "policy-value", name: "policy" },
    Object.entries(POLICIES).map(([value, label]) => h("option", { value }, label)));
  const form = h("form", { class: "row", "data-testid": "policy-form" },
    h("label", { for: "policy-type" }, "Type"), type,
    h("label", { for: "policy-value" }, "Policy"), policy,
    h("button", { type: "submit", class: "btn btn-primary" }, "Set policy"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      await api("POST", "/v1/workflow-policies", {
        body: { workflow_type: type.value.trim(), policy: policy.value },
      });
      toast(`${type.value.trim()}: ${POLICIES[policy.value]}`);
      onSet();
    } catch (error) {
      toast(errorText(error), "error");
    }
  });
  return form;
}

export function workersView(root) {
  const controller = new AbortController();
  const body = h("div", { "data-testid": "workers-body" });
  const errorBox = h("div", { class: "inline-error", role: "alert", hidden: true, "data-testid": "workers-error" });
  let inflight = false;

  async function load() {
    inflight = true;
    try {
      const signal = controller.signal;
      const [workers, builds, policies, pauses] = await Promise.all([
        api("GET", "/v1/workers", { signal }),
        api("GET", "/v1/builds", { signal }),
        api("GET", "/v1/workflow-policies", { signal }),
        api("GET", "/v1/pauses", { signal }),
      ]);
      errorBox.hidden = true;
      fill(body,
        section("Workers", {},
          table("workers-table",
            ["Task queue", "Build", "Identity", "Workflow types", "Step types", "In flight"],
            workerRows(workers.workers ?? []))),
        section("Builds", {},
          h("p", { class: "hint" }, "Newest first on each task queue. A build can stop once it holds no open runs of a pinned type."),
          table("builds-table",
            ["Task queue", "Build", "First seen", "Last seen", "Workers", "Open runs", "Pinned runs", "Newest for"],
            buildRows(builds.builds ?? []))),
        section("Routing policies", {},
          h("p", { class: "hint" }, "Types not listed are unversioned: any worker serving them."),
          table("policies-table", ["Workflow type", "Policy", "Set"],
            (policies.policies ?? []).map((p) => [p.workflow_type, POLICIES[p.policy] ?? p.policy, timeEl(p.update_time)])),
          policyForm(load)),
        pausesSection(pauses.pauses ?? [], load));
    } catch (error) {
      if (isAbort(error)) return;
      errorBox.textContent = errorText(error);
      errorBox.hidden = false;
    } finally {
      inflight = false;
    }
  }

  fill(root, h("h1", {}, "Workers and builds"), errorBox, body);
  load();
  const timer = setInterval(() => {
    if (!document.hidden && !inflight && !root.contains(document.activeElement?.closest("form"))) load();
  }, REFRESH_MS);
  return {
    unmount() {
      clearInterval(timer);
      controller.abort();
    },
  };
}
