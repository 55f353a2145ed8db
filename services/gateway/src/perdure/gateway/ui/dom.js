// DOM and timing helpers: build elements (text only, never HTML), fill and reorder them,
// show toasts, debounce, sleep, recognise an aborted fetch.

/** Create an element: h("a", {href: "#/", class: "x"}, "text", child, [more]). */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(props ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") el.className = value;
    else if (name === "text") el.textContent = value;
    else if (name === "dataset") Object.assign(el.dataset, value);
    else if (name.startsWith("on") && typeof value === "function") {
      el.addEventListener(name.slice(2), value);
    } else if (value === true) el.setAttribute(name, "");
    else el.setAttribute(name, String(value));
  }
  appendAll(el, children);
  return el;
}

function appendAll(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
}

/** Replace an element's children (null, false and undefined are skipped). */
export function fill(el, ...children) {
  el.replaceChildren();
  appendAll(el, children);
  return el;
}

/** Put `elements` first in `parent`, in this order, moving only what is out of place (so a
 * focused element stays focused). */
export function arrange(parent, elements) {
  elements.forEach((el, i) => {
    if (parent.children[i] !== el) parent.insertBefore(el, parent.children[i] ?? null);
  });
}

export function $(selector, root = document) {
  return root.querySelector(selector);
}

/** A card: a section titled by its h2. */
export function section(title, props = {}, ...children) {
  const id = props.id || `s-${title.toLowerCase().replace(/[^a-z0-9]+/g, "-")}`;
  return h("section", { class: "card", "aria-labelledby": `${id}-title`, ...props, id },
    h("h2", { id: `${id}-title` }, title), children);
}

export function toast(message, kind = "info") {
  const region = $("#toasts");
  const item = h("div", { class: `toast toast-${kind}`, role: kind === "error" ? "alert" : null }, message);
  region.append(item);
  setTimeout(() => item.remove(), 6000);
}

export function debounce(fn, ms) {
  let timer = null;
  const debounced = (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
  debounced.cancel = () => clearTimeout(timer);
  return debounced;
}

export function sleep(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => { clearTimeout(timer); resolve(); }, { once: true });
  });
}

export function isAbort(error) {
  return error?.name === "AbortError";
}

export const enc = encodeURIComponent;
