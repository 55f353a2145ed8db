// The client of the gateway's HTTP/JSON API (docs/http_api.md): requests with the tab's key
// and namespace, its errors as ApiError, and the banner asking for a key on a 401.

import { $, enc, isAbort } from "./dom.js";
import { parseExact, stringifyExact } from "./exactjson.js";
import { settings } from "./settings.js";

export class ApiError extends Error {
  constructor(status, error, fallback) {
    super(error?.message || fallback || `HTTP ${status}`);
    this.name = "ApiError";
    this.status = status;
    this.code = error?.code || "";
    this.reason = error?.reason || "";
  }

  /** "400 FAILED_PRECONDITION (WORKFLOW_CLOSED): workflow 'x' is closed". */
  describe() {
    if (!this.status) return this.message;
    const what = [this.status, this.code].filter(Boolean).join(" ");
    return `${what}${this.reason ? ` (${this.reason})` : ""}: ${this.message}`;
  }
}

/** An error as a line of text: the API's in full. */
export function errorText(error) {
  return error instanceof ApiError ? error.describe() : String(error);
}

export function apiUrl(path, params = {}) {
  const url = new URL(path, location.origin);
  for (const [name, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(name, value);
  }
  if (settings.namespace) url.searchParams.set("namespace", settings.namespace);
  return url;
}

export function authHeaders(extra = {}) {
  const headers = { Accept: "application/json", ...extra };
  if (settings.key) headers.Authorization = `Bearer ${settings.key}`;
  return headers;
}

/** The ApiError a failed response stands for (a 401 also asks for a key). */
export async function errorFrom(response) {
  let body = null;
  try { body = await response.json(); } catch { /* not JSON */ }
  const error = new ApiError(
    response.status,
    body?.error,
    `${response.status} ${response.statusText || "error"}`,
  );
  if (response.status === 401) showAuthBanner(error.message);
  return error;
}

export async function api(method, path, { params, body, signal } = {}) {
  let response;
  try {
    response = await fetch(apiUrl(path, params), {
      method,
      headers: authHeaders(body === undefined ? {} : { "Content-Type": "application/json" }),
      body: body === undefined ? undefined : stringifyExact(body),
      signal,
      cache: "no-store",
    });
  } catch (error) {
    if (isAbort(error)) throw error;
    throw new ApiError(0, null, `The gateway did not answer (${error.message}).`);
  }
  if (!response.ok) throw await errorFrom(response);
  hideAuthBanner();
  const text = await response.text();
  return text ? parseExact(text) : {};
}

export const workflowPath = (id, suffix = "") => `/v1/workflows/${enc(id)}${suffix}`;

function showAuthBanner(message) {
  const banner = $("#auth-banner");
  $("#auth-reason").textContent = message
    ? `The server refused the request: ${message}`
    : "The server refused the request (401 Unauthenticated).";
  if (banner.hidden) {
    banner.hidden = false;
    $("#auth-key-input").focus();
  }
}

export function hideAuthBanner() {
  $("#auth-banner").hidden = true;
}
