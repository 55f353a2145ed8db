// The list page (#/): the runs, filtered by status, type and ID prefix, a page at a time,
// refreshed every few seconds.

import { api, errorText } from "./api.js";
import { arrange, debounce, enc, fill, h, isAbort } from "./dom.js";
import { OPEN_STATUSES, fmtClock, statusBadge, statusLabel, timeEl } from "./format.js";
import { RESEARCH_TYPE } from "./start.js";
import { field } from "./forms.js";
import { pauseTag, pausesOf } from "./pauses.js";

const LIST_REFRESH_MS = 2000;
const LIST_PAGE_SIZE = 50;

const WORKFLOW_STATUSES = [
  "WORKFLOW_STATUS_RUNNING",
  "WORKFLOW_STATUS_WAITING",
  "WORKFLOW_STATUS_COMPLETED",
  "WORKFLOW_STATUS_FAILED",
  "WORKFLOW_STATUS_PARKED",
  "WORKFLOW_STATUS_CANCELLED",
  "WORKFLOW_STATUS_TERMINATED",
];

export function listView(root, query) {
  const controller = new AbortController();
  const state = {
    status: query.get("status") || "",
    type: query.get("type") || "",
    prefix: query.get("prefix") || "",
    tokens: [""],
    page: 0,
    nextToken: "",
    inflight: null,
    auto: true,
    lastError: "",
  };
  if (state.status && !state.status.startsWith("WORKFLOW_STATUS_")) {
    state.status = `WORKFLOW_STATUS_${state.status.toUpperCase()}`;
  }
  const knownTypes = new Set([RESEARCH_TYPE]);

  const statusSelect = h("select", { id: "filter-status", name: "status" },
    h("option", { value: "" }, "All statuses"),
    WORKFLOW_STATUSES.map((s) => h("option", { value: s }, statusLabel(s))));
  statusSelect.value = state.status;
  const typeInput = h("input", {
    id: "filter-type", name: "type", type: "text", list: "known-types", autocomplete: "off",
    spellcheck: "false", placeholder: "any type", value: state.type,
  });
  const typeList = h("datalist", { id: "known-types" });
  const prefixInput = h("input", {
    id: "filter-prefix", name: "prefix", type: "search", autocomplete: "off",
    spellcheck: "false", placeholder: "e.g. research-", value: state.prefix,
  });
  const autoBox = h("input", { id: "filter-auto", type: "checkbox", checked: true });
  const tbody = h("tbody", {});
  const summary = h("p", { class: "list-summary", "aria-live": "polite", "data-testid": "list-summary" });
  const refreshed = h("span", { class: "muted small", "data-testid": "list-refreshed" });
  const errorBox = h("div", { class: "inline-error", role: "alert", hidden: true, "data-testid": "list-error" });
  const prevButton = h("button", { type: "button", class: "btn", disabled: true }, "← Newer");
  const nextButton = h("button", { type: "button", class: "btn", disabled: true }, "Older →");
  const pageLabel = h("span", { class: "muted small" }, "Page 1");

  root.append(
    h("div", { class: "page-head" },
      h("h1", {}, "Workflows"),
      h("a", { class: "btn btn-primary", href: "#/start" }, "Start a workflow")),
    h("form", { class: "filters", role: "search", "aria-label": "Filter workflow runs",
      onsubmit: (event) => { event.preventDefault(); applyFilters(); } },
    field("filter-status", "Status", statusSelect),
    field("filter-type", "Workflow type", typeInput, typeList),
    h("div", { class: "field field-grow" }, h("label", { for: "filter-prefix" }, "Workflow ID starts with"), prefixInput),
    h("div", { class: "field field-check" }, autoBox, h("label", { for: "filter-auto" }, "Refresh every 2 s"))),
    h("div", { class: "list-meta" }, summary, refreshed),
    errorBox,
    h("div", { class: "table-wrap" },
      h("table", { class: "runs", "data-testid": "workflow-table" },
        h("caption", { class: "visually-hidden" }, "Workflow runs, newest first"),
        h("thead", {}, h("tr", {},
          h("th", { scope: "col" }, "Workflow ID"),
          h("th", { scope: "col" }, "Type"),
          h("th", { scope: "col" }, "Status"),
          h("th", { scope: "col" }, "Created"),
          h("th", { scope: "col" }, "Updated / closed"))),
        tbody)),
    h("nav", { class: "pager", "aria-label": "Pages" }, prevButton, pageLabel, nextButton),
  );

  const rows = new Map();
  let emptyRow = null;

  function renderRows(workflows, pauses) {
    const seen = new Set();
    const ordered = [];
    for (const run of workflows) {
      seen.add(run.workflow_id);
      if (run.workflow_type) knownTypes.add(run.workflow_type);
      let entry = rows.get(run.workflow_id);
      if (!entry) {
        const link = h("a", { href: `#/workflows/${enc(run.workflow_id)}`, class: "mono" }, run.workflow_id);
        const cells = [h("td", {}), h("td", {}), h("td", {}), h("td", {})];
        const tr = h("tr", { "data-testid": "workflow-row", "data-workflow-id": run.workflow_id },
          h("th", { scope: "row" }, link), cells);
        entry = { tr, cells, signature: "" };
        rows.set(run.workflow_id, entry);
      }
      const held = pausesOf(run, pauses);
      const signature = JSON.stringify([
        run.workflow_type, run.status, run.create_time, run.update_time, run.close_time,
        run.cancel_requested, held,
      ]);
      if (entry.signature !== signature) {
        entry.signature = signature;
        entry.tr.dataset.status = run.status;
        const [type, status, created, updated] = entry.cells;
        fill(type, run.workflow_type);
        fill(status, statusBadge(run.status),
          run.cancel_requested && OPEN_STATUSES.has(run.status)
            ? h("span", { class: "tag" }, "cancel requested") : null,
          pauseTag(held));
        fill(created, timeEl(run.create_time));
        fill(updated, run.close_time
          ? h("span", {}, h("span", { class: "muted" }, "closed "), timeEl(run.close_time))
          : timeEl(run.update_time));
      }
      ordered.push(entry.tr);
    }
    for (const [id, entry] of rows) {
      if (!seen.has(id)) { entry.tr.remove(); rows.delete(id); }
    }
    if (ordered.length === 0) {
      emptyRow ??= h("tr", { class: "empty" }, h("td", { colspan: "5" },
        "No workflow runs match. ", h("a", { href: "#/start" }, "Start one"), "."));
      if (!emptyRow.isConnected) fill(tbody, emptyRow);
    } else {
      emptyRow?.remove();
      arrange(tbody, ordered);
    }
    const types = [...knownTypes].sort();
    if (typeList.children.length !== types.length) {
      fill(typeList, ...types.map((t) => h("option", { value: t })));
    }
  }

  async function load() {
    state.inflight?.abort();
    const mine = new AbortController();
    state.inflight = mine;
    const signal = AbortSignal.any([controller.signal, mine.signal]);
    try {
      // The pauses in force mark the runs they hold (a reader key lists them; without one,
      // the list shows no marks rather than no runs). Never a rejection left unawaited: an
      // abort of the list's own request ends this refresh before it is read.
      const paused = api("GET", "/v1/pauses", { signal }).catch(() => ({}));
      const answer = await api("GET", "/v1/workflows", {
        signal,
        params: {
          status: state.status,
          workflow_type: state.type.trim(),
          workflow_id_prefix: state.prefix.trim(),
          page_size: LIST_PAGE_SIZE,
          page_token: state.tokens[state.page],
        },
      });
      const runs = answer.workflows || [];
      renderRows(runs, (await paused)?.pauses || []);
      state.nextToken = answer.next_page_token || "";
      prevButton.disabled = state.page === 0;
      nextButton.disabled = !state.nextToken;
      pageLabel.textContent = `Page ${state.page + 1}`;
      const text = runs.length === 0 ? "No runs"
        : `${runs.length} run${runs.length === 1 ? "" : "s"}${state.nextToken ? " on this page" : ""}`;
      if (summary.textContent !== text) summary.textContent = text;
      refreshed.textContent = `updated ${fmtClock(new Date().toISOString()).slice(0, 8)}`;
      errorBox.hidden = true;
      state.lastError = "";
    } catch (error) {
      if (isAbort(error)) return;
      const text = errorText(error);
      if (text !== state.lastError) {
        state.lastError = text;
        fill(errorBox, h("strong", {}, "Could not list runs. "), text);
      }
      errorBox.hidden = false;
    } finally {
      if (state.inflight === mine) state.inflight = null;
    }
  }

  function writeHash() {
    const params = new URLSearchParams();
    if (state.status) params.set("status", state.status.replace(/^WORKFLOW_STATUS_/, "").toLowerCase());
    if (state.type.trim()) params.set("type", state.type.trim());
    if (state.prefix.trim()) params.set("prefix", state.prefix.trim());
    const qs = params.toString();
    history.replaceState(null, "", `${location.pathname}${location.search}#/${qs ? `?${qs}` : ""}`);
  }

  function applyFilters() {
    state.status = statusSelect.value;
    state.type = typeInput.value;
    state.prefix = prefixInput.value;
    state.tokens = [""];
    state.page = 0;
    writeHash();
    load();
  }

  const applySoon = debounce(applyFilters, 250);
  statusSelect.addEventListener("change", applyFilters);
  typeInput.addEventListener("input", applySoon);
  prefixInput.addEventListener("input", applySoon);
  autoBox.addEventListener("change", () => { state.auto = autoBox.checked; if (state.auto) load(); });
  nextButton.addEventListener("click", () => {
    if (!state.nextToken) return;
    state.tokens[state.page + 1] = state.nextToken;
    state.page += 1;
    load();
  });
  prevButton.addEventListener("click", () => {
    if (state.page === 0) return;
    state.page -= 1;
    load();
  });

  load();
  const timer = setInterval(() => {
    if (state.auto && !document.hidden && !state.inflight) load();
  }, LIST_REFRESH_MS);

  return {
    unmount() {
      clearInterval(timer);
      applySoon.cancel();
      controller.abort();
    },
  };
}
