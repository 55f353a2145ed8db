// A run's relatives on its page: the parent it is a child of (a link in the run's details)
// and the child workflows it started (a card of links, with each child's status and
// parent-close policy). Describe gives both (WorkflowInfo.parent_*, children).

import { fill, h, section } from "./dom.js";
import { enumLabel, statusBadge } from "./format.js";

/** The link to a run's page. */
export function runLink(workflowId, props = {}) {
  return h("a", { class: "mono small", href: `#/workflows/${encodeURIComponent(workflowId)}`, ...props }, workflowId);
}

/** The run's parent, as a link with the parent's run id, or null for a run that is no child. */
export function parentLink(run) {
  if (!run.parent_workflow_id) return null;
  return h("span", {},
    runLink(run.parent_workflow_id, { "data-testid": "workflow-parent-link" }),
    run.parent_run_id ? h("span", { class: "muted small" }, ` · run ${run.parent_run_id}`) : null,
    run.parent_close_policy
      ? h("span", { class: "muted small" }, ` · on close: ${enumLabel(run.parent_close_policy, "PARENT_CLOSE_POLICY_")}`) : null);
}

/** The card of the child workflows the run started, hidden while it started none. */
export function childrenCard() {
  const list = h("ul", { class: "signal-list", "data-testid": "children" });
  const element = section("Child workflows", { id: "children", hidden: true }, list);
  return {
    element,
    update(described) {
      const children = described.children || [];
      const key = JSON.stringify(children);
      if (list.dataset.key === key) return;
      list.dataset.key = key;
      element.hidden = children.length === 0;
      fill(list, ...children.map((child) =>
        h("li", { "data-testid": "child" },
          runLink(child.workflow_id, { "data-testid": "child-link" }), " ",
          statusBadge(child.status),
          h("div", { class: "muted small" },
            `${child.workflow_type || "?"} · call ${child.step_id}`,
            child.parent_close_policy ? ` · on close: ${enumLabel(child.parent_close_policy, "PARENT_CLOSE_POLICY_")}` : ""))));
    },
  };
}
