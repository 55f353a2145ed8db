// The start page (#/start): a form for the research agent with its fault injection, and one
// for any workflow type with a JSON input.

import { api } from "./api.js";
import { debounce, enc, h, isAbort, toast } from "./dom.js";
import { prettyJson } from "./format.js";
import { field, messageRegion, parseJsonField, required, withBusy } from "./forms.js";

export const RESEARCH_TYPE = "research_agent";
const RESEARCH_STEPS = [
  "create_plan", "research_1", "research_2", "analyze", "recommend", "report", "notify",
];
const STREAMED_STEPS = ["analyze", "report"];

/** The start page; `navigate(hash)` shows the run once started. */
export function startView(root, query, navigate) {
  const controller = new AbortController();
  const stepOptions = (none) => [h("option", { value: "" }, none),
    ...RESEARCH_STEPS.map((s) => h("option", { value: s }, s))];

  // The research agent.
  const topic = h("input", { id: "ra-topic", type: "text", required: true, value: "durable execution", autocomplete: "off" });
  const raId = h("input", { id: "ra-id", type: "text", autocomplete: "off", spellcheck: "false", placeholder: "generated when empty", "aria-describedby": "ra-id-help" });
  const raQueue = h("input", { id: "ra-queue", type: "text", autocomplete: "off", spellcheck: "false", value: "default" });
  const slowStep = h("select", { id: "ra-slow-step" }, stepOptions("No slow step"));
  const slowSeconds = h("input", { id: "ra-slow-seconds", type: "number", min: "0.1", max: "3600", step: "0.1", value: "10", disabled: true });
  const failStep = h("select", { id: "ra-fail-step" }, stepOptions("No failing step"));
  const crash = h("input", { id: "ra-crash", type: "checkbox" });
  const midStream = h("select", { id: "ra-mid-stream" }, h("option", { value: "" }, "No crash mid-stream"),
    ...STREAMED_STEPS.map((s) => h("option", { value: s }, s)));
  const preview = h("pre", { class: "json preview", "data-testid": "ra-preview", "aria-live": "off" });
  const raMsg = messageRegion("start-message");

  function researchInput() {
    const input = { topic: topic.value.trim() };
    if (slowStep.value) {
      input.slow_step = slowStep.value;
      input.slow_seconds = Number(slowSeconds.value);
    }
    if (failStep.value) input.fail_step_once = failStep.value;
    if (crash.checked) input.crash_after_notification = true;
    if (midStream.value) input.crash_mid_stream = midStream.value;
    return input;
  }
  const updatePreview = () => {
    slowSeconds.disabled = !slowStep.value;
    preview.textContent = prettyJson(researchInput());
  };

  const raForm = h("form", { class: "card stack", "aria-labelledby": "ra-title", "data-testid": "research-form", novalidate: true },
    h("h2", { id: "ra-title" }, "Research agent"),
    h("p", { class: "muted" }, "Plans, researches, recommends, waits for your approval, then reports and notifies. ",
      "Type ", h("code", {}, RESEARCH_TYPE), "."),
    field("ra-topic", "Topic", topic),
    h("div", { class: "grid-2" },
      field("ra-id", "Workflow ID (optional)", raId,
        h("span", { id: "ra-id-help", class: "hint" }, "Starting twice with the same ID and input returns the same run.")),
      field("ra-queue", "Task queue", raQueue)),
    h("fieldset", { class: "faults" },
      h("legend", {}, "Fault injection"),
      h("div", { class: "grid-2" },
        field("ra-slow-step", "Slow step", slowStep),
        field("ra-slow-seconds", "Slow step sleeps (seconds)", slowSeconds)),
      field("ra-fail-step", "Fail one step once", failStep,
        h("span", { class: "hint" }, "Its first attempt fails; the retry runs on the durable schedule.")),
      field("ra-mid-stream", "Crash the worker mid-stream", midStream,
        h("span", { class: "hint" }, "The worker exits after a few tokens of the step's text; the retry streams it again after a reset.")),
      h("div", { class: "field field-check" }, crash,
        h("label", { for: "ra-crash" }, "Crash the worker right after the notification is sent"))),
    h("details", { class: "preview-wrap" }, h("summary", {}, "Input sent"), preview),
    h("div", { class: "row" }, h("button", { type: "submit", class: "btn btn-primary" }, "Start research run")),
    raMsg.element);
  for (const el of [topic, slowStep, slowSeconds, failStep, crash, midStream]) {
    el.addEventListener("input", updatePreview);
    el.addEventListener("change", updatePreview);
  }
  updatePreview();
  raForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    raMsg.clear();
    if (!required(topic, raMsg, "Give the research a topic.")) return;
    if (slowStep.value) {
      const seconds = Number(slowSeconds.value);
      if (!(seconds > 0 && seconds <= 3600)) {
        slowSeconds.setAttribute("aria-invalid", "true");
        raMsg.error("The slow step needs a number of seconds from 0.1 to 3600.");
        slowSeconds.focus();
        return;
      }
      slowSeconds.removeAttribute("aria-invalid");
    }
    await start(event.submitter, raMsg, {
      workflow_type: RESEARCH_TYPE,
      workflow_id: fixedId(raId),
      task_queue: raQueue.value.trim(),
      input: researchInput(),
    });
  });

  // Any workflow type.
  const gType = h("input", { id: "g-type", type: "text", required: true, autocomplete: "off", spellcheck: "false", value: query.get("type") || "" });
  const gId = h("input", { id: "g-id", type: "text", autocomplete: "off", spellcheck: "false", placeholder: "generated when empty" });
  const gQueue = h("input", { id: "g-queue", type: "text", autocomplete: "off", spellcheck: "false", value: "default" });
  const gInput = h("textarea", { id: "g-input", rows: "8", class: "mono", spellcheck: "false", "aria-describedby": "g-input-status" }, "{}");
  const gInputStatus = h("span", { id: "g-input-status", class: "hint", "aria-live": "polite" }, "Valid JSON.");
  const gMsg = messageRegion("generic-start-message");
  const checkInput = () => {
    const parsed = parseJsonField(gInput);
    gInputStatus.textContent = parsed.ok ? "Valid JSON." : `Not valid JSON: ${parsed.error}`;
    gInputStatus.classList.toggle("hint-error", !parsed.ok);
    return parsed;
  };
  gInput.addEventListener("input", debounce(checkInput, 200));
  const gForm = h("form", { class: "card stack", "aria-labelledby": "g-title", "data-testid": "generic-form", novalidate: true },
    h("h2", { id: "g-title" }, "Any workflow"),
    h("p", { class: "muted" }, "Any registered workflow type with a JSON input."),
    field("g-type", "Workflow type", gType),
    h("div", { class: "grid-2" },
      field("g-id", "Workflow ID (optional)", gId),
      field("g-queue", "Task queue", gQueue)),
    field("g-input", "Input (JSON)", gInput, gInputStatus),
    h("div", { class: "row" }, h("button", { type: "submit", class: "btn btn-primary" }, "Start workflow")),
    gMsg.element);
  gForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    gMsg.clear();
    if (!required(gType, gMsg, "Name the workflow type.")) return;
    const parsed = checkInput();
    if (!parsed.ok) {
      gMsg.error(`The input is not valid JSON: ${parsed.error}`);
      gInput.focus();
      return;
    }
    await start(event.submitter, gMsg, {
      workflow_type: gType.value.trim(),
      workflow_id: fixedId(gId),
      task_queue: gQueue.value.trim(),
      input: parsed.value,
    });
  });

  async function start(button, message, request) {
    const body = { ...request };
    if (!body.task_queue) delete body.task_queue;
    await withBusy(button, async () => {
      try {
        const answer = await api("POST", "/v1/workflows", { body, signal: controller.signal });
        toast(answer.started === false
          ? `A run with ID ${answer.workflow_id} already existed with this request: showing it.`
          : `Started ${answer.workflow_id}.`);
        navigate(`#/workflows/${enc(answer.workflow_id)}`);
      } catch (error) {
        if (isAbort(error)) return;
        message.error(error);
      }
    });
  }

  root.append(
    h("div", { class: "page-head" }, h("h1", {}, "Start a workflow")),
    h("div", { class: "start-grid" }, raForm, gForm),
  );
  return { unmount() { controller.abort(); } };
}

/**
 * The workflow ID a start sends: the one typed, else a new one, written into the field before the
 * first send, so that sending again (after a lost answer) starts nothing new.
 * @param {HTMLInputElement} input
 */
function fixedId(input) {
  if (!input.value.trim()) input.value = newWorkflowId();
  return input.value.trim();
}

function newWorkflowId() {
  if (crypto.randomUUID) return crypto.randomUUID(); // secure contexts (https, localhost)
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
}
