// How the API's values are shown: enum labels, dates, durations, JSON blocks, status badges,
// failures and waits.

import { stringifyExact } from "./exactjson.js";
import { h } from "./dom.js";

/** The statuses of a run that has not closed. */
export const OPEN_STATUSES = new Set(["WORKFLOW_STATUS_RUNNING", "WORKFLOW_STATUS_WAITING"]);

export function enumLabel(value, prefix) {
  if (!value) return "Unknown";
  const bare = value.startsWith(prefix) ? value.slice(prefix.length) : value;
  return bare.charAt(0) + bare.slice(1).toLowerCase().replaceAll("_", " ");
}

export const statusLabel = (status) => enumLabel(status, "WORKFLOW_STATUS_");
const stepStatusLabel = (status) => enumLabel(status, "STEP_STATUS_");
export const eventTypeName = (type) => (type || "").replace(/^EVENT_TYPE_/, "");

export function toMillis(iso) {
  if (!iso) return NaN;
  return Date.parse(iso);
}

const pad = (n, width = 2) => String(n).padStart(width, "0");

/** "2024-05-01 14:03:22" in local time. */
function fmtDateTime(iso) {
  const ms = toMillis(iso);
  if (Number.isNaN(ms)) return "—";
  const d = new Date(ms);
  const today = new Date();
  const time = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  if (d.toDateString() === today.toDateString()) return `today ${time}`;
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${time}`;
}

/** "14:03:22.123" in local time. */
export function fmtClock(iso) {
  const ms = toMillis(iso);
  if (Number.isNaN(ms)) return "—";
  const d = new Date(ms);
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

/** "245 ms", "2.4 s", "3 m 05 s", "2 h 04 m", "3 d 2 h". */
export function fmtDuration(ms) {
  if (!Number.isFinite(ms)) return "—";
  ms = Math.max(0, ms);
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 10) return `${s.toFixed(1)} s`;
  if (s < 60) return `${Math.floor(s)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} m ${pad(Math.floor(s % 60))} s`;
  const hrs = Math.floor(m / 60);
  if (hrs < 48) return `${hrs} h ${pad(m % 60)} m`;
  return `${Math.floor(hrs / 24)} d ${hrs % 24} h`;
}

/** Whole seconds for countdowns: "3 s", "1 m 05 s". */
export function fmtSeconds(seconds) {
  seconds = Math.max(0, Math.ceil(seconds));
  if (seconds < 60) return `${seconds} s`;
  return fmtDuration(seconds * 1000);
}

/** A byte count (an int64 as a decimal string) in decimal units: "812 B", "12.3 kB", "4.1 MB". */
export function fmtBytes(bytes) {
  const value = Number(bytes || 0);
  if (value < 1000) return `${value} B`;
  const units = ["kB", "MB", "GB", "TB"];
  let scaled = value / 1000;
  let unit = 0;
  while (scaled >= 1000 && unit < units.length - 1) {
    scaled /= 1000;
    unit += 1;
  }
  return `${scaled.toFixed(1)} ${units[unit]}`;
}

/** Millionths (an int64 as a decimal string) as a whole amount with 6 decimals, exactly. */
export function fmtMicros(micros) {
  const value = BigInt(micros || "0");
  const whole = value / 1000000n;
  const fraction = (value % 1000000n).toString().padStart(6, "0");
  return `${whole}.${fraction}`;
}

export function timeEl(iso, format = fmtDateTime) {
  if (!iso) return h("span", { class: "muted" }, "—");
  return h("time", { datetime: iso, title: iso }, format(iso));
}

// Payloads arrive with their numbers as JsonNumber (exactjson.js): shown as written.
export function prettyJson(value) {
  return stringifyExact(value, 2);
}

export function shortJson(value, max = 140) {
  const text = stringifyExact(value);
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

export function jsonBlock(value, props = {}) {
  return h("pre", { class: "json", ...props }, prettyJson(value));
}

export function statusBadge(status, props = {}) {
  const bare = (status || "WORKFLOW_STATUS_UNSPECIFIED").replace(/^WORKFLOW_STATUS_/, "");
  return h(
    "span",
    { class: `badge badge-${bare.toLowerCase()}`, dataset: { status: status || "" }, ...props },
    statusLabel(status),
  );
}

export function stepBadge(status, props = {}) {
  const bare = (status || "STEP_STATUS_UNSPECIFIED").replace(/^STEP_STATUS_/, "");
  const label = bare === "UNSPECIFIED" ? "Started" : stepStatusLabel(status);
  return h(
    "span",
    { class: `badge step-badge-${bare.toLowerCase()}`, dataset: { status: status || "" }, ...props },
    label,
  );
}

export function failureText(failure) {
  if (!failure) return "";
  return failure.type ? `${failure.type}: ${failure.message}` : failure.message;
}

export function failureBlock(failure, props = {}) {
  return h(
    "div",
    { class: "failure", ...props },
    h("p", {},
      failure.type ? h("strong", { class: "failure-type" }, failure.type) : null,
      failure.type ? ": " : null,
      h("span", { class: "failure-message" }, failure.message || "(no message)")),
    failure.stack_trace
      ? h("details", {}, h("summary", {}, "Stack trace"), h("pre", { class: "stack" }, failure.stack_trace))
      : null,
  );
}

/** "signal “go”", "approval “deploy”", "timer", "retry of step research_1", ... */
export function waitText(wait) {
  if (!wait) return "";
  switch (wait.kind) {
    case "WAIT_KIND_SIGNAL": return `signal “${wait.name}”`;
    case "WAIT_KIND_TIMER": return `timer ${wait.name || ""}`.trim();
    case "WAIT_KIND_RETRY": return `next attempt of step ${wait.name}`;
    case "WAIT_KIND_STEP": return `remote step ${wait.name}`;
    case "WAIT_KIND_CHILD": return `child workflow ${wait.name}`;
    case "WAIT_KIND_APPROVAL": return `approval “${String(wait.name).replace(/^\$approval:/, "")}”`;
    default: return wait.name || "—";
  }
}
