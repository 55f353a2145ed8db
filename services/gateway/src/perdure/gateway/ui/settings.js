// The tab's settings, the API key and the namespace: kept in session storage, taken from a
// link's `key=` and `namespace=`, the key shown on the header's key button.

import { $ } from "./dom.js";

const KEY_STORAGE = "perdure.apiKey";
const NS_STORAGE = "perdure.namespace";

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

/** Take `key=prd_...` (and `namespace=`) from the URL fragment or query, then drop them from
 * the address bar so the key is not left in the history or shared by copying the URL. */
export function takeSettingsFromUrl() {
  let hash = location.hash.replace(/^#/, "");
  let changed = false;
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
  // The query's values win over the fragment's.
  for (const source of [params, search]) {
    for (const name of ["key", "namespace"]) {
      if (!source.has(name)) continue;
      settings[name] = source.get(name) || "";
      source.delete(name);
      changed = true;
    }
  }
  if (!changed) return;
  const rest = params.toString();
  hash = `#${path || "/"}${rest ? `?${rest}` : ""}`;
  const qs = search.toString();
  history.replaceState(null, "", `${location.pathname}${qs ? `?${qs}` : ""}${hash}`);
}

/** The header's key button: which key is in use, if any. */
export function renderKeyControl() {
  const label = $("#key-toggle-label");
  if (!label) return;
  const key = settings.key;
  label.textContent = key ? `API key: …${key.slice(-4)}` : "API key: none";
  $("#key-toggle").classList.toggle("has-key", Boolean(key));
}
