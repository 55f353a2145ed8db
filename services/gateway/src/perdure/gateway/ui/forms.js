// Form helpers shared by the pages: a message line under a form, a button busy while its
// request runs, a labelled field, a required field and a JSON text field checked and marked
// invalid.

import { parseExact } from "./exactjson.js";
import { ApiError } from "./api.js";
import { h } from "./dom.js";

/** A labelled field: `<div class="field"><label for=id>label</label>` then `controls`. */
export function field(id, label, ...controls) {
  return h("div", { class: "field" }, h("label", { for: id }, label), ...controls);
}

/** A message region for a form: role=status, aria-live, error styling. */
export function messageRegion(testid) {
  const el = h("p", { class: "form-msg", role: "status", "aria-live": "polite", "data-testid": testid });
  return {
    element: el,
    ok(text) { el.className = "form-msg form-msg-ok"; el.textContent = text; },
    error(error) {
      el.className = "form-msg form-msg-error";
      el.textContent = error instanceof ApiError ? error.describe() : String(error?.message ?? error);
    },
    clear() { el.className = "form-msg"; el.textContent = ""; },
  };
}

/** Run `work` with the button's form disabled and the button marked busy. */
export async function withBusy(button, work) {
  const form = button.form;
  const controls = form ? [...form.elements] : [button];
  const before = controls.map((c) => c.disabled);
  controls.forEach((c) => { c.disabled = true; });
  button.setAttribute("aria-busy", "true");
  try {
    return await work();
  } finally {
    controls.forEach((c, i) => { c.disabled = before[i]; });
    button.removeAttribute("aria-busy");
  }
}

/** Whether a required field has a value; when it has none, mark it invalid, say `message` in
 * `messages` and focus it. */
export function required(field, messages, message) {
  if (field.value.trim()) {
    field.removeAttribute("aria-invalid");
    return true;
  }
  field.setAttribute("aria-invalid", "true");
  messages.error(message);
  field.focus();
  return false;
}

/** A field's JSON as {ok, value} (empty is null) or {ok: false, error}, marked aria-invalid
 * when it is not JSON. */
export function parseJsonField(field) {
  const text = field.value.trim();
  if (!text) { field.removeAttribute("aria-invalid"); return { ok: true, value: null }; }
  try {
    const value = parseExact(text); // numbers kept as written, sent back exactly
    field.removeAttribute("aria-invalid");
    return { ok: true, value };
  } catch (error) {
    field.setAttribute("aria-invalid", "true");
    return { ok: false, error: error.message };
  }
}
