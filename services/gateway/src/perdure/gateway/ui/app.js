// The Perdure web UI: a dependency-free single-page app over the gateway's HTTP/JSON API
// (docs/http_api.md). Hash routes: #/ (runs), #/workflows/<id> (one run), #/start, #/workers,
// #/schedules, #/approvals.
// Everything the server sends is inserted as text (textContent), never as HTML.
//
// This entry point sets up the header (API key, namespace), routes the hash to a page and
// boots; each page and helper lives in its own module next to it.

import { hideAuthBanner } from "./api.js";
import { $, fill, h, toast } from "./dom.js";
import { listView } from "./list.js";
import { approvalsView } from "./approvals.js";
import { schedulesView } from "./schedules.js";
import { keyHint, renderKeyControl, settings, takeSettingsFromUrl } from "./settings.js";
import { startView } from "./start.js";
import { workersView } from "./workers.js";
import { workflowView } from "./workflow.js";

// -- header: API key and namespace ---------------------------------------------------------------

function setupHeader() {
  const toggle = $("#key-toggle");
  const panel = $("#key-panel");
  const input = $("#key-input");
  const open = (yes) => {
    panel.hidden = !yes;
    toggle.setAttribute("aria-expanded", String(yes));
    if (yes) { input.value = settings.key; input.focus(); }
  };
  toggle.addEventListener("click", () => open(panel.hidden));
  panel.addEventListener("keydown", (event) => {
    if (event.key === "Escape") { open(false); toggle.focus(); }
  });
  $("#key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    settings.key = input.value;
    open(false);
    toggle.focus();
    hideAuthBanner();
    toast(settings.key ? "API key saved for this tab." : "API key cleared.");
    rerender();
  });
  $("#key-clear").addEventListener("click", () => {
    settings.key = "";
    input.value = "";
    open(false);
    toggle.focus();
    toast("API key cleared.");
    rerender();
  });
  $("#auth-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const value = $("#auth-key-input").value.trim();
    if (!value) { $("#auth-key-input").focus(); return; }
    settings.key = value;
    $("#auth-key-input").value = "";
    hideAuthBanner();
    toast("API key saved for this tab.");
    rerender();
  });

  const ns = $("#namespace-input");
  ns.value = settings.namespace;
  const applyNamespace = () => {
    if (ns.value.trim() === settings.namespace) return;
    settings.namespace = ns.value;
    toast(settings.namespace ? `Namespace: ${settings.namespace}` : "Namespace: the key's default");
    rerender();
  };
  $("[data-testid=namespace-form]").addEventListener("submit", (event) => {
    event.preventDefault();
    applyNamespace();
  });
  ns.addEventListener("change", applyNamespace);
  renderKeyControl();
}

// -- a key from a link ---------------------------------------------------------------------------

/** A link's key: used at once by a tab that has none; a tab with another key asks first, so
 * that a link cannot switch the key a page acts with behind its user's back. */
function offerKey(offered) {
  if (!offered || offered === settings.key) { hideKeyOffer(); return; }
  if (!settings.key) {
    settings.key = offered;
    toast(`Using the API key from the link (${keyHint(offered)}).`);
    return;
  }
  $("#key-offer-new").textContent = keyHint(offered);
  $("#key-offer-old").textContent = keyHint(settings.key);
  $("#key-offer").hidden = false;
  $("#key-offer-use").onclick = () => {
    settings.key = offered;
    hideKeyOffer();
    hideAuthBanner();
    toast(`API key switched to the link's (${keyHint(offered)}).`);
    rerender();
  };
  $("#key-offer-keep").focus();
}

function hideKeyOffer() {
  $("#key-offer").hidden = true;
  $("#key-offer-use").onclick = null;
}

function setupKeyOffer() {
  $("#key-offer-keep").addEventListener("click", () => {
    hideKeyOffer();
    toast(`Kept this tab's API key (${keyHint(settings.key)}).`);
  });
}

// -- router --------------------------------------------------------------------------------------

let currentView = null;
let firstRender = true;

function parseHash() {
  const raw = location.hash.replace(/^#/, "") || "/";
  const at = raw.indexOf("?");
  const path = at === -1 ? raw : raw.slice(0, at);
  const query = new URLSearchParams(at === -1 ? "" : raw.slice(at + 1));
  return { path: path || "/", query };
}

function rerender() {
  const main = $("#main");
  currentView?.unmount?.();
  currentView = null;
  fill(main);
  const { path, query } = parseHash();
  let nav = "";
  if (path === "/" || path === "") {
    nav = "list";
    currentView = listView(main, query);
  } else if (path === "/start") {
    nav = "start";
    currentView = startView(main, query, navigate);
  } else if (path === "/workers") {
    nav = "workers";
    currentView = workersView(main);
  } else if (path === "/approvals") {
    nav = "approvals";
    currentView = approvalsView(main);
  } else if (path === "/schedules") {
    nav = "schedules";
    currentView = schedulesView(main);
  } else if (path.startsWith("/workflows/") && path.length > "/workflows/".length) {
    let id;
    try { id = decodeURIComponent(path.slice("/workflows/".length)); } catch { id = path.slice(11); }
    currentView = workflowView(main, id);
  } else {
    main.append(
      h("h1", { tabindex: "-1" }, "Page not found"),
      h("p", {}, "Nothing lives at this address. ", h("a", { href: "#/" }, "See all workflows"), "."),
    );
  }
  for (const link of document.querySelectorAll("[data-nav]")) {
    if (link.dataset.nav === nav) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  const heading = $("h1", main);
  document.title = heading ? `${heading.textContent} · Perdure` : "Perdure";
  if (!firstRender && heading) {
    heading.setAttribute("tabindex", "-1");
    heading.focus({ preventScroll: true });
  }
  firstRender = false;
  window.scrollTo(0, 0);
}

function navigate(hash) {
  if (location.hash === hash) rerender();
  else location.hash = hash;
}

// -- boot ----------------------------------------------------------------------------------------

const offered = takeSettingsFromUrl();
setupHeader();
setupKeyOffer();
offerKey(offered);
window.addEventListener("hashchange", () => {
  offerKey(takeSettingsFromUrl());
  rerender();
});
rerender();
