// The Output card of a run's page: the text its steps stream (current_step().emit) on the
// run's "output" stream, live over GET /v1/workflows/{id}/streams/output (docs/http_api.md:
// `frame` events, each a StreamFrame with its seq as id), one panel per step.
// A reset frame (the attempt that emitted the step's text so far failed) clears that step's
// text and leaves a marker saying so: the panel never mixes text from two attempts.

import { workflowPath } from "./api.js";
import { h } from "./dom.js";
import { jsonBlock, shortJson } from "./format.js";
import { followSse, liveIndicator } from "./sse.js";

export const OUTPUT_STREAM = "output";

const isReset = (frame) => frame.kind === "FRAME_KIND_RESET";

/** The Output card (hidden until a step streams something); follow(signal) reads the stream. */
export function outputCard(id) {
  const panels = h("div", { class: "stream-panels", "data-testid": "stream-panels" });
  const live = liveIndicator("stream-live");
  const element = h("section", { class: "card output-card", id: "output", "aria-labelledby": "output-title", hidden: true, "data-testid": "output-card" },
    h("div", { class: "card-head" }, h("h2", { id: "output-title" }, "Output"), live.element),
    panels);
  const steps = new Map();
  let lastSeq = 0;

  function panelOf(stepId) {
    let step = steps.get(stepId);
    if (step) return step;
    const attempt = h("span", { class: "muted small", "data-testid": "stream-attempt" });
    const markers = h("div", { class: "stream-markers" });
    const text = h("div", { class: "stream-text", "data-testid": "stream-text", "aria-live": "off" });
    const panel = h("article", { class: "stream-panel", "data-testid": `stream-${stepId}`, "data-step-id": stepId },
      h("h3", { class: "stream-head" }, h("span", { class: "mono" }, stepId), " ", attempt),
      markers, text);
    step = { attempt, markers, text, restart: null };
    steps.set(stepId, step);
    panels.append(panel);
    element.hidden = false;
    return step;
  }

  /** Show one frame; a frame at or below the last sequence number shown is skipped. */
  function add(frame) {
    const seq = Number(frame.seq);
    if (!(seq > lastSeq)) return;
    lastSeq = seq;
    const step = panelOf(String(frame.step_id ?? ""));
    const attempt = Number(frame.attempt || 1);
    if (isReset(frame)) {
      step.text.replaceChildren();
      step.restart = h("span", { "data-testid": "stream-restart" });
      step.markers.append(h("p", { class: "stream-reset", role: "status", "data-testid": "stream-reset", "data-attempt": String(attempt) },
        h("strong", {}, `Attempt ${attempt} failed`), ": the text it streamed was dropped. ", step.restart));
      return;
    }
    if (step.restart && attempt > Number(step.markers.lastChild.dataset.attempt)) {
      step.restart.textContent = `The step restarted: attempt ${attempt}.`;
      step.restart = null;
    }
    step.attempt.textContent = attempt > 1 ? `· attempt ${attempt}` : "";
    const data = frame.data;
    if (typeof data === "string") step.text.append(data);
    else step.text.append(data && typeof data === "object" ? jsonBlock(data) : `${shortJson(data)}\n`);
  }

  function follow(signal) {
    return followSse(workflowPath(id, `/streams/${OUTPUT_STREAM}`), {
      signal,
      onState: live.set,
      onMessage(type, data) { if (type === "frame") add(data); },
    });
  }

  return { element, follow };
}
