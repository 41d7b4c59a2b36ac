// Jobs: the tenant's list (filter, search, pages), a form to try one, and one job's
// status, timeline, error, download, cancel, webhook deliveries and diagnosis, kept live.

import { api, coalesce, follow, isOutage, pause, POLL_MS, query, refreshBeforeUse } from "./api.js";
import {
  announce, el, errorBox, facts, field, fill, number, options, outageNote, pager, size,
  statusBadge, table, when,
} from "./dom.js";

const PAGE = 20;
const STATUSES = ["queued", "running", "done", "failed", "cancelled"];
export const TERMINAL = new Set(["done", "failed", "cancelled"]);
const HIDDEN_FIELDS = new Set(["seq", "type", "at", "job_id", "v"]);

function jobLink(id) {
  return el("a", { href: `#/jobs/${encodeURIComponent(id)}`, class: "mono" }, id);
}

function jobRow(job) {
  return [
    el("td", {}, jobLink(job.id)), el("td", {}, statusBadge(job.status)),
    el("td", {}, when(job.created_at)), el("td", {}, when(job.finished_at)),
    el("td", { class: "num" }, number(job.pages)), el("td", { class: "num" }, size(job.bytes)),
  ];
}

const JOB_COLUMNS = ["Job", "Status", "Created", "Finished", { label: "Pages", num: true }, { label: "Size", num: true }];

function openForm() {
  const id = el("input", { type: "text", id: "open-job-id", required: true, class: "mono" });
  const form = el("form", { class: "inline" }, field("Job id", id), el("button", { type: "submit" }, "Open job"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    location.hash = `#/jobs/${encodeURIComponent(id.value.trim())}`;
  });
  return form;
}

function listProblem(error) {
  if (error.status !== 404 && error.status !== 405) return errorBox(error);
  return el("div", { class: "message" },
    el("p", {}, "This gateway does not list jobs yet (GET /jobs); open one by its id."), openForm());
}

function filterForm(filter) {
  const status = el("select", { id: "job-status-filter", name: "status" },
    options([["", "any"], ...STATUSES.map((s) => [s, s])], filter.status));
  const q = el("input", { type: "search", id: "job-search", name: "q", value: filter.q, class: "mono" });
  const form = el("form", { class: "inline", role: "search", "aria-label": "Filter jobs" },
    field("Status", status), field("Job id starts with", q), el("button", { type: "submit" }, "Filter"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    location.hash = `#/jobs${query({ status: status.value, q: q.value.trim() })}`;
  });
  return form;
}

/** Refill the list when it changed (an unchanged one keeps the focus where it is). While
 * the gateway is away, say so above the rows last shown and keep trying (false: not
 * ended); a refusal (a bad filter, a 404) is shown and ends the polling. */
async function loadJobs(region, filter, signal, last) {
  let page;
  try {
    const path = `/jobs${query({ status: filter.status, q: filter.q, limit: PAGE, offset: filter.offset })}`;
    page = await api("GET", path, undefined, signal);
  } catch (error) {
    if (signal.aborted) return true;
    if (isOutage(error)) { outageNote(region, error); return false; }
    fill(region, listProblem(error));
    return true;
  }
  outageNote(region, null);
  const seen = JSON.stringify(page);
  if (seen !== last.seen) {
    last.seen = seen;
    const go = (offset) => { location.hash = `#/jobs${query({ ...filter, offset })}`; };
    fill(region, table("Jobs, newest first", JOB_COLUMNS, page.jobs.map(jobRow), "No jobs match."), pager(page, go));
  }
  return page.jobs.every((job) => TERMINAL.has(job.status));
}

function sourceChoice() {
  const radio = (value, label, checked) => el("label", {},
    el("input", { type: "radio", name: "source-kind", value, checked }), ` ${label}`);
  return el("fieldset", {}, el("legend", {}, "Source"),
    radio("template", "Jinja2 template with data", true), " ", radio("html", "HTML as it is", false),
    " ", radio("markdown", "Markdown", false));
}

function jobBody(form) {
  const kind = form.querySelector("input[name=source-kind]:checked").value;
  const source = form.querySelector("#job-source").value;
  const output = form.querySelector("#job-output").value;
  const body = kind === "html" ? { html: source }
    : kind === "markdown" ? { markdown: source }
    : { template: source, data: parseData(form.querySelector("#job-data").value) };
  if (output !== "pdf") body.options = { output };
  return body;
}

/** The JSON object typed in a data field; an Error naming the problem otherwise. */
export function parseData(text) {
  let data;
  try {
    data = JSON.parse(text.trim() || "{}");
  } catch (error) {
    throw new Error(`Data is not valid JSON: ${error.message}`);
  }
  if (data === null || typeof data !== "object" || Array.isArray(data)) throw new Error("Data must be a JSON object, such as {\"name\": \"Ana\"}");
  return data;
}

function submitForm() {
  const problem = el("div", { id: "job-submit-error", role: "alert" });
  const form = el("form", { id: "job-submit", "aria-labelledby": "job-submit-title" },
    el("h2", { id: "job-submit-title" }, "Try a job"), sourceChoice(),
    field("Template, HTML or Markdown", el("textarea", { id: "job-source", rows: 4, value: "<h1>Hello {{ name }}</h1>" })),
    field("Data (JSON)", el("textarea", { id: "job-data", rows: 3, value: "{\"name\": \"Ana\"}" }), "The template's variables; not used for HTML or Markdown."),
    field("Output", el("select", { id: "job-output" }, options([["pdf", "PDF"], ["png", "PNG image"], ["jpeg", "JPEG image"], ["webp", "WebP image"]], "pdf"))),
    problem, el("button", { type: "submit" }, "Submit job"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    fill(problem);
    try {
      const job = await api("POST", "/jobs", jobBody(form));
      announce(`Job ${job.id} submitted.`);
      location.hash = `#/jobs/${encodeURIComponent(job.id)}`;
    } catch (error) {
      fill(problem, error.type ? errorBox(error, "Not submitted") : el("div", { class: "error" }, error.message));
    }
  });
  return el("section", { class: "card" }, form);
}

export function listJobs(main, params, signal) {
  const filter = { status: params.status || "", q: params.q || "", offset: Number(params.offset || 0) };
  const region = el("div", { id: "jobs" }, el("p", {}, "Loading…"));
  main.append(el("h1", {}, "Jobs"), filterForm(filter), region, submitForm());
  const last = { seen: null };
  return follow(null, coalesce(() => loadJobs(region, filter, signal, last)), signal);
}

// One job.

function details(entry) {
  const shown = Object.entries(entry).filter(([name]) => !HIDDEN_FIELDS.has(name) && !name.includes("secret"));
  const text = shown.map(([name, value]) => `${name}: ${typeof value === "string" ? value : JSON.stringify(value)}`).join("; ");
  return text.length > 300 ? `${text.slice(0, 299)}…` : text;
}

function timelineTable(found) {
  const rows = found.events.map((entry) => [
    el("td", { class: "num" }, entry.seq), el("td", {}, entry.type), el("td", {}, when(entry.at)),
    el("td", { class: "wrap" }, details(entry)),
  ]);
  return table("Timeline, from the log", [{ label: "Seq", num: true }, "Event", "At", "Details"], rows);
}

function webhooksTable(found) {
  const rows = found.attempts.map((a) => [
    el("td", { class: "num" }, a.attempt), el("td", {}, a.outcome), el("td", { class: "num" }, a.status_code ?? "—"),
    el("td", { class: "wrap" }, a.error || "—"), el("td", { class: "num" }, a.latency_ms ?? "—"), el("td", {}, when(a.at)),
  ]);
  return table("Webhook delivery attempts", [{ label: "Attempt", num: true }, "Outcome", { label: "Status", num: true }, "Error", { label: "Latency (ms)", num: true }, "At"], rows, "No delivery attempts.");
}

function summary(job) {
  return facts([
    ["Status", statusBadge(job.status)], ["Attempts", number(job.attempts)],
    ["Created", when(job.created_at)], ["Started", when(job.started_at)], ["Finished", when(job.finished_at)],
    ["Pages", number(job.pages)], ["Size", size(job.bytes)],
    ["Render time", job.render_ms == null ? "—" : `${job.render_ms} ms`],
    ["Webhook", job.webhook_url || "none"],
  ]);
}

// A diagnosis: what the page did on each attempt that kept one (every value as text).

function where(line) {
  if (!line.url && line.line == null) return "—";
  return `${line.url || "(inline)"}${line.line == null ? "" : `:${line.line}:${line.column ?? 1}`}`;
}

function pendingText(wait) {
  if (!wait) return "none";
  return Object.entries(wait).map(([name, value]) => `${name}: ${value}`).join(", ");
}

function consoleTable(attempt) {
  const rows = attempt.console.map((line) => [
    el("td", {}, line.level), el("td", { class: "wrap mono" }, line.text), el("td", { class: "wrap" }, where(line)),
  ]);
  return table("Console", ["Level", "Message", "Where"], rows, "No console messages.");
}

function errorsTable(attempt) {
  const rows = attempt.errors.map((error) => [
    el("td", { class: "wrap mono" }, error.text), el("td", { class: "wrap" }, where(error)),
  ]);
  return table("Uncaught errors", ["Error", "Where"], rows, "No uncaught errors.");
}

function requestsTable(attempt) {
  const rows = attempt.requests.map((r) => [
    el("td", { class: "wrap mono" }, r.url), el("td", {}, r.type || "—"), el("td", { class: "num" }, r.status ?? "—"),
    el("td", { class: "num" }, r.ms ?? "—"), el("td", { class: "wrap" }, r.refused ? `refused: ${r.refused}` : r.error || "—"),
  ]);
  return table("Requests", ["URL", "Type", { label: "Status", num: true }, { label: "Time (ms)", num: true }, "Failure"], rows, "No requests.");
}

function diagnosisAttempt(attempt) {
  const error = attempt.error ? `${attempt.error.type}: ${attempt.error.message}` : "none (asked for)";
  const shot = attempt.screenshot
    ? el("img", { src: attempt.screenshot, class: "preview diagnosis-screenshot", alt: `The page when attempt ${attempt.attempt} ended` })
    : el("p", {}, "No screenshot: the attempt ended before a page could be captured.");
  return el("section", { class: "diagnosis", "data-attempt": attempt.attempt },
    el("h3", {}, `Attempt ${attempt.attempt}`),
    facts([["At", when(attempt.at)], ["Error", error], ["Pending wait_for", pendingText(attempt.pending_wait_for)]]),
    consoleTable(attempt), errorsTable(attempt), requestsTable(attempt), shot);
}

async function showDiagnosis(parts, job, signal) {
  if (!job.attempts) return;
  try {
    const found = await api("GET", `/jobs/${encodeURIComponent(parts.id)}/diagnostics`, undefined, signal);
    fill(parts.diagnosis, found.attempts.map(diagnosisAttempt));
    parts.diagnosisPart.hidden = false;
  } catch (error) {
    if (error.status === 404) parts.diagnosisPart.hidden = true;
    else if (!signal.aborted) fill(parts.diagnosis, errorBox(error));
  }
}

async function part(region, load, render) {
  try {
    fill(region, render(await load()));
  } catch (error) {
    fill(region, errorBox(error));
  }
}

function jobParts(id) {
  const parts = {
    summary: el("div", { id: "job-summary", "aria-live": "polite" }, el("p", {}, "Loading…")),
    error: el("div", { id: "job-error" }),
    download: el("a", { id: "job-download", class: "button", hidden: true, download: "" }, "Download"),
    cancel: el("button", { type: "button", id: "job-cancel", class: "danger", hidden: true }, "Cancel job"),
    timeline: el("div", { id: "job-timeline" }),
    webhooks: el("div", { id: "job-webhooks" }),
    redeliver: el("button", { type: "button", id: "job-redeliver", class: "secondary", hidden: true }, "Redeliver webhook"),
    note: el("div", { id: "job-note", role: "status" }),
    diagnosis: el("div", { id: "job-diagnosis" }),
  };
  parts.diagnosisPart = el("div", { hidden: true }, el("h2", {}, "Diagnosis"), parts.diagnosis);
  parts.id = id;
  return parts;
}

function showState(parts, job) {
  fill(parts.summary, summary(job));
  fill(parts.error, job.error ? errorBox(job.error, "Failed") : null);
  parts.download.hidden = !job.url;
  if (job.url) parts.download.href = job.url;
  parts.cancel.hidden = TERMINAL.has(job.status);
  parts.redeliver.hidden = !(TERMINAL.has(job.status) && job.webhook_url);
}

async function refreshJob(parts, signal) {
  const path = `/jobs/${encodeURIComponent(parts.id)}`;
  let job;
  try {
    job = await api("GET", path, undefined, signal);
  } catch (error) {
    if (!signal.aborted) fill(parts.summary, errorBox(error));
    return error.status >= 400 && error.status < 500;
  }
  showState(parts, job);
  await part(parts.timeline, () => api("GET", `${path}/events`, undefined, signal), timelineTable);
  await showWebhooks(parts, signal);
  await showDiagnosis(parts, job, signal);
  return TERMINAL.has(job.status);
}

async function showWebhooks(parts, signal) {
  const load = () => api("GET", `/jobs/${encodeURIComponent(parts.id)}/webhooks`, undefined, signal);
  await part(parts.webhooks, load, (found) => {
    parts.attempts = found.attempts.length;
    return webhooksTable(found);
  });
}

/** After a redelivery, look at the delivery log every 2 s until a new attempt shows (for
 * up to a minute): the job has ended, so no live update will bring it. */
async function watchDeliveries(parts, signal) {
  const before = parts.attempts;
  for (let round = 0; round < 30 && !signal.aborted && parts.attempts === before; round += 1) {
    await pause(POLL_MS, signal);
    await showWebhooks(parts, signal);
  }
}

function act(parts, button, call, done) {
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      await call();
      fill(parts.note, done);
      announce(done);
    } catch (error) {
      fill(parts.note, errorBox(error));
    } finally {
      button.disabled = false;
    }
  });
}

export function showJob(main, params, signal) {
  const parts = jobParts(params.id);
  const path = `/jobs/${encodeURIComponent(params.id)}`;
  main.append(
    el("h1", {}, "Job ", el("code", {}, params.id)), parts.summary, parts.error,
    el("div", { class: "actions" }, parts.download, parts.cancel), parts.note,
    parts.diagnosisPart, el("h2", {}, "Timeline"), parts.timeline,
    el("h2", {}, "Webhook deliveries"), parts.webhooks, el("div", { class: "actions" }, parts.redeliver));
  const refresh = coalesce(() => refreshJob(parts, signal));
  refreshBeforeUse(parts.download, async () => (await api("GET", path)).url,
    (error) => fill(parts.note, errorBox(error, "No fresh link")));
  act(parts, parts.cancel, () => api("DELETE", path).then(refresh), "Cancel requested.");
  const redeliver = async () => {
    await api("POST", `${path}/webhooks/redeliver`);
    watchDeliveries(parts, signal);
  };
  act(parts, parts.redeliver, redeliver, "Redelivery queued.");
  return follow(`${path}/stream`, refresh, signal);
}
