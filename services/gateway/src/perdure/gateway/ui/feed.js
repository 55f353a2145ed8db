// A run's live feed of journal events (GET /v1/workflows/{id}/events, server-sent events).

import { workflowPath } from "./api.js";
import { followSse } from "./sse.js";

/**
 * Follow a run's live feed. Calls onEvent(event) per history event, onStatus(summary) when the
 * run's status changes, onEnd(data) once, onState(state, detail) for "connecting" | "live" |
 * "reconnecting" | "ended" | "error".
 */
export function followEvents(id, { signal, onEvent, onStatus, onEnd, onState, lastEventId = "" }) {
  return followSse(workflowPath(id, "/events"), {
    signal,
    lastEventId,
    onState,
    onMessage(type, data) {
      if (type === "history") onEvent(data);
      else if (type === "status") onStatus?.(data);
      else if (type === "end") onEnd(data);
    },
  });
}
