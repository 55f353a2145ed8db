// The tab's settings, the API key and the namespace: kept in session storage, taken from a
// link's fragment (`#key=prd_...`, `#/path?namespace=...`), the key shown on the header's key
// button. A key is never taken from the query string (`/?key=`): that part of a link reaches
// the server, its logs and its traces.

import { $ } from "./dom.js";

const KEY_STORAGE = "perdure.apiKey";
const NS_STORAGE = "perdure.namespace";
const URL_SETTINGS = ["key", "namespace"];

function storageGet(name) {
  try { return sessionStorage.getItem(name) || ""; } catch { return ""; }
}

function storageSet(name, value) {
  try {
    if (value) sessionStorage.setItem(name, value);
    else sessionStorage.removeItem(name);
  } catch { /* storage disabled: the value lives until the page reloads */ }
}

export const settings = {
  get key() { return storageGet(KEY_STORAGE); },
  set key(value) { storageSet(KEY_STORAGE, value.trim()); renderKeyControl(); },
  get namespace() { return storageGet(NS_STORAGE); },
  set namespace(value) { storageSet(NS_STORAGE, value.trim()); },
};

/** Take the fragment's `namespace=`, and return its `key=` (or ""): the caller decides whether
 * the tab uses that key. Both leave the address bar, and so does a `key=` or `namespace=` of
 * the query string, which is ignored, so that no key is left in the history or shared by
 * copying the URL. */
export function takeSettingsFromUrl() {
  const hash = location.hash.replace(/^#/, "");
  let path = hash;
  let query = "";
  if (/^(key|namespace)=/.test(hash)) {
    path = "/";
    query = hash;
  } else if (hash.includes("?")) {
    [path, query] = [hash.slice(0, hash.indexOf("?")), hash.slice(hash.indexOf("?") + 1)];
  }
  const params = new URLSearchParams(query);
  const search = new URLSearchParams(location.search);
  const offeredKey = (params.get("key") || "").trim();
  if (params.has("namespace")) settings.namespace = params.get("namespace") || "";
  const changed = URL_SETTINGS.some((name) => params.has(name) || search.has(name));
  if (!changed) return offeredKey;
  for (const name of URL_SETTINGS) { params.delete(name); search.delete(name); }
  const rest = params.toString();
  const qs = search.toString();
  history.replaceState(null, "", `${location.pathname}${qs ? `?${qs}` : ""}#${path || "/"}${rest ? `?${rest}` : ""}`);
  return offeredKey;
}

/** A key as the UI shows it: its last four characters. */
export const keyHint = (key) => `…${key.slice(-4)}`;

/** The header's key button: which key is in use, if any. */
export function renderKeyControl() {
  const label = $("#key-toggle-label");
  if (!label) return;
  const key = settings.key;
  label.textContent = key ? `API key: ${keyHint(key)}` : "API key: none";
  $("#key-toggle").classList.toggle("has-key", Boolean(key));
}
