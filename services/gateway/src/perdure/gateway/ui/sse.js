// Server-sent events read over fetch (so the Authorization header can be sent), resumed with
// Last-Event-ID after a drop: the gateway's live feeds (a run's events, a run's stream).

import { parseExact } from "./exactjson.js";
import { apiUrl, authHeaders, errorFrom } from "./api.js";
import { h, isAbort, sleep } from "./dom.js";
import { fmtSeconds } from "./format.js";

const LIVE_LABELS = {
  connecting: "Connecting…",
  live: "Live",
  reconnecting: "Reconnecting…",
  ended: "Complete: the run is closed",
  error: "Feed unavailable",
};

/** A feed's state as a badge: `element`, and set(state, detail) as onState takes it. */
export function liveIndicator(testid) {
  const element = h("span", { class: "live", "data-testid": testid, "data-state": "connecting" }, LIVE_LABELS.connecting);
  function set(state, detail) {
    element.dataset.state = state;
    element.textContent = detail ? `${LIVE_LABELS[state]} (${detail})` : LIVE_LABELS[state];
  }
  return { element, set };
}

/**
 * Follow the SSE route `path` until its `end` event. Calls onMessage(type, data, id) per event
 * (data parsed as exact JSON; `end` included), onState(state, detail) for "connecting" |
 * "live" | "reconnecting" | "ended" | "error". After a drop it reconnects with the last `id:`
 * seen as Last-Event-ID, so that each event arrives once.
 */
export async function followSse(path, { signal, onMessage, onState, lastEventId = "" }) {
  let backoff = 500;
  let lastId = lastEventId;
  let feedError = "";
  while (!signal.aborted) {
    onState(lastId ? "reconnecting" : "connecting");
    try {
      const headers = authHeaders({ Accept: "text/event-stream" });
      if (lastId) headers["Last-Event-ID"] = lastId;
      const response = await fetch(apiUrl(path), { headers, signal, cache: "no-store" });
      if (!response.ok) {
        const error = await errorFrom(response);
        if ([400, 401, 403, 404].includes(response.status)) {
          onState("error", error.describe());
          return;
        }
        throw error;
      }
      onState("live");
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      let message = { id: null, event: "", data: [] };
      let ended = false;
      const dispatch = () => {
        const { id, event, data } = message;
        message = { id: null, event: "", data: [] };
        if (id !== null) lastId = id;
        if (data.length === 0) return;
        let parsed;
        try { parsed = parseExact(data.join("\n")); } catch { return; }
        const type = event || "message";
        if (type === "error") { feedError = parsed?.error?.message || "the feed failed"; return; }
        if (type === "end") ended = true;
        else backoff = 500;
        onMessage(type, parsed, id);
      };
      while (!ended) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let match;
        while ((match = /\r\n|\r|\n/.exec(buffer)) !== null) {
          // A lone "\r" at the end may be the first half of "\r\n": wait for more.
          if (match[0] === "\r" && match.index === buffer.length - 1) break;
          const line = buffer.slice(0, match.index);
          buffer = buffer.slice(match.index + match[0].length);
          if (line === "") { dispatch(); if (ended) break; continue; }
          if (line.startsWith(":")) continue; // a comment: keepalive
          const colon = line.indexOf(":");
          const field = colon === -1 ? line : line.slice(0, colon);
          let value = colon === -1 ? "" : line.slice(colon + 1);
          if (value.startsWith(" ")) value = value.slice(1);
          if (field === "id") message.id = value;
          else if (field === "event") message.event = value;
          else if (field === "data") message.data.push(value);
        }
      }
      if (ended) {
        reader.cancel().catch(() => {});
        onState("ended");
        return;
      }
    } catch (error) {
      if (isAbort(error) || signal.aborted) return;
    }
    if (signal.aborted) return;
    onState("reconnecting", `${feedError ? `${feedError}; ` : ""}retrying in ${fmtSeconds(backoff / 1000)}`);
    feedError = "";
    await sleep(backoff, signal);
    backoff = Math.min(backoff * 2, 10000);
  }
}
