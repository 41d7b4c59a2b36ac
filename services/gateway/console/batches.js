// Batches: the tenant's list with live progress bars, and one batch with its controls
// (pause, resume, cancel, each enabled only where the batch's state allows), its items
// page by page and its archive once it has ended.

import { api, coalesce, follow, isOutage, query, refreshBeforeUse } from "./api.js";
import {
  announce, el, errorBox, facts, field, fill, number, options, outageNote, pager, size,
  statusBadge, table, when,
} from "./dom.js";
import { parseData } from "./jobs.js";

const PAGE = 20;
const STATUSES = ["queued", "running", "paused", "done", "failed", "cancelled"];
const ITEM_STATUSES = ["queued", "running", "done", "failed", "cancelled"];
const ENDED = new Set(["done", "failed", "cancelled"]);

function batchLink(id) {
  return el("a", { href: `#/batches/${encodeURIComponent(id)}`, class: "mono" }, id);
}

function ended(batch) {
  return batch.done + batch.failed + batch.cancelled;
}

/** What the bar's colour says: how the batch is going or ended (`partial`: done, with some
 * items failed). Green is kept for a batch whose every item was rendered. */
export function outcome(batch) {
  if (batch.status === "done") return batch.failed || batch.cancelled ? "partial" : "done";
  return batch.status;
}

/** The bar and its words: a `<progress>` (announced as a value) coloured by the outcome,
 * and the counts as text. */
export function progressLine(batch, id) {
  const bar = el("progress", { max: Math.max(batch.total, 1), value: ended(batch), id: id || null,
    class: `outcome-${outcome(batch)}`, "data-outcome": outcome(batch),
    "aria-label": `Items ended of ${batch.total}` });
  return el("span", { class: "progress-line" }, bar,
    el("span", { class: "counts" },
      el("span", { class: "count-done" }, `${batch.done} done`), ", ",
      el("span", { class: "count-failed" }, `${batch.failed} failed`), ", ",
      `${batch.cancelled} cancelled, of ${batch.total}`));
}

function rate(batch) {
  return batch.rate == null ? "—" : `${number(batch.rate, 1)} items/s`;
}

function batchRow(batch) {
  return [
    el("td", {}, batchLink(batch.id)), el("td", {}, statusBadge(batch.status)),
    el("td", {}, progressLine(batch)), el("td", { class: "num" }, rate(batch)),
    el("td", {}, when(batch.eta)), el("td", {}, when(batch.created_at)),
  ];
}

const BATCH_COLUMNS = ["Batch", "Status", "Progress", { label: "Rate", num: true }, "ETA", "Created"];

async function loadBatches(region, filter, signal, last) {
  let page;
  try {
    page = await api("GET", `/batches${query({ status: filter.status, limit: PAGE, offset: filter.offset })}`, undefined, signal);
  } catch (error) {
    if (signal.aborted) return true;
    if (isOutage(error)) { outageNote(region, error); return false; }
    fill(region, errorBox(error));
    return true;
  }
  outageNote(region, null);
  const seen = JSON.stringify(page);
  if (seen !== last.seen) {
    last.seen = seen;
    const go = (offset) => { location.hash = `#/batches${query({ ...filter, offset })}`; };
    fill(region, table("Batches, newest first", BATCH_COLUMNS, page.batches.map(batchRow), "No batches."), pager(page, go));
  }
  return page.batches.every((batch) => ENDED.has(batch.status));
}

function statusFilter(id, statuses, chosen, onChange) {
  const select = el("select", { id }, options([["", "any"], ...statuses.map((s) => [s, s])], chosen));
  const form = el("form", { class: "inline", role: "search", "aria-label": "Filter by status" },
    field("Status", select), el("button", { type: "submit" }, "Filter"));
  form.addEventListener("submit", (event) => { event.preventDefault(); onChange(select.value); });
  return form;
}

/** The items typed one JSON object per line: each line is one item's data. */
function itemsOf(text) {
  const lines = text.split("\n").map((line) => line.trim()).filter(Boolean);
  return lines.map((line, index) => {
    try {
      return { data: parseData(line) };
    } catch (error) {
      throw new Error(`Line ${index + 1}: ${error.message}`);
    }
  });
}

function submitForm() {
  const problem = el("div", { id: "batch-submit-error", role: "alert" });
  const form = el("form", { id: "batch-submit", "aria-labelledby": "batch-submit-title" },
    el("h2", { id: "batch-submit-title" }, "Try a batch"),
    field("Template", el("textarea", { id: "batch-template", rows: 3, value: "<h1>Invoice {{ number }}</h1>" })),
    field("Items, one JSON object of data per line", el("textarea", { id: "batch-items", rows: 4,
      value: "{\"number\": 1}\n{\"number\": 2}\n{\"number\": 3}" })),
    problem, el("button", { type: "submit" }, "Submit batch"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    fill(problem);
    try {
      const body = { template: form.querySelector("#batch-template").value, items: itemsOf(form.querySelector("#batch-items").value) };
      const batch = await api("POST", "/batches", body);
      announce(`Batch ${batch.id} submitted.`);
      location.hash = `#/batches/${encodeURIComponent(batch.id)}`;
    } catch (error) {
      fill(problem, error.type ? errorBox(error, "Not submitted") : el("div", { class: "error" }, error.message));
    }
  });
  return el("section", { class: "card" }, form);
}

export function listBatches(main, params, signal) {
  const filter = { status: params.status || "", offset: Number(params.offset || 0) };
  const region = el("div", { id: "batches" }, el("p", {}, "Loading…"));
  const onChange = (status) => { location.hash = `#/batches${query({ status })}`; };
  main.append(el("h1", {}, "Batches"), statusFilter("batch-status-filter", STATUSES, filter.status, onChange), region, submitForm());
  const last = { seen: null };
  return follow(null, coalesce(() => loadBatches(region, filter, signal, last)), signal);
}

// One batch.

function summary(batch) {
  return facts([
    ["Status", statusBadge(batch.status)],
    ["Progress", progressLine(batch, "batch-progress")],
    ["Rate", rate(batch)], ["ETA", when(batch.eta)], ["Output", batch.output || "zip"],
    ["Created", when(batch.created_at)], ["Started", when(batch.started_at)], ["Finished", when(batch.finished_at)],
    ["Archive size", size(batch.bytes)],
  ]);
}

function itemRow(item) {
  const job = item.job_id ? el("a", { href: `#/jobs/${encodeURIComponent(item.job_id)}`, class: "mono" }, item.job_id) : "—";
  const error = item.error ? [el("code", {}, item.error.type), " ", item.error.message] : "—";
  return [
    el("td", { class: "num" }, item.index), el("td", { class: "wrap" }, item.filename || "—"), el("td", {}, job),
    el("td", {}, statusBadge(item.status)), el("td", { class: "num" }, number(item.attempts)),
    el("td", { class: "wrap item-error" }, error),
  ];
}

const ITEM_COLUMNS = [{ label: "Index", num: true }, "File", "Job", "Status", { label: "Attempts", num: true }, "Error"];

function batchParts() {
  const button = (id, label, cls) => el("button", { type: "button", id, class: cls, disabled: true }, label);
  return {
    summary: el("div", { id: "batch-summary" }, el("p", {}, "Loading…")),
    error: el("div", { id: "batch-error" }),
    pause: button("batch-pause", "Pause", "secondary"),
    resume: button("batch-resume", "Resume", "secondary"),
    cancel: button("batch-cancel", "Cancel batch", "danger"),
    archive: el("a", { id: "batch-archive", class: "button", hidden: true, download: "" }, "Download archive"),
    note: el("div", { id: "batch-note", role: "status" }),
    items: el("div", { id: "batch-items" }),
    seen: { batch: null, items: null },
  };
}

function showBatchState(parts, batch) {
  const seen = JSON.stringify(batch);
  if (seen === parts.seen.batch) return;
  parts.seen.batch = seen;
  fill(parts.summary, summary(batch));
  fill(parts.error, batch.error ? errorBox(typeof batch.error === "string" ? { type: "batch", message: batch.error } : batch.error, "Failed") : null);
  const over = ENDED.has(batch.status);
  parts.pause.disabled = over || batch.status === "paused";
  parts.resume.disabled = batch.status !== "paused";
  parts.cancel.disabled = over;
  parts.archive.hidden = !batch.url;
  if (batch.url) parts.archive.href = batch.url;
  keepFocus(parts);
}

async function showItems(parts, path, filter, signal) {
  let page;
  try {
    page = await api("GET", `${path}/items${query({ status: filter.status, limit: PAGE, offset: filter.offset })}`, undefined, signal);
  } catch (error) {
    if (!signal.aborted) fill(parts.items, errorBox(error));
    return;
  }
  const seen = JSON.stringify(page);
  if (seen === parts.seen.items) return;
  parts.seen.items = seen;
  const go = (offset) => { filter.offset = offset; parts.refresh(); };
  fill(parts.items, table("Items, by index", ITEM_COLUMNS, page.items.map(itemRow), "No items match."), pager(page, go));
}

async function refreshBatch(parts, path, filter, signal) {
  let batch;
  try {
    batch = await api("GET", path, undefined, signal);
  } catch (error) {
    if (!signal.aborted) fill(parts.summary, errorBox(error));
    return error.status >= 400 && error.status < 500;
  }
  showBatchState(parts, batch);
  await showItems(parts, path, filter, signal);
  return ENDED.has(batch.status);
}

function control(parts, button, path, verb, said) {
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      await api("POST", `${path}/${verb}`);
      fill(parts.note, said);
      announce(said);
    } catch (error) {
      fill(parts.note, errorBox(error));
    }
    parts.seen.batch = null; // the buttons' state comes from the batch again
    parts.pressed = button;
    await parts.refresh();
  });
}

/** A button just pressed and disabled drops the keyboard's focus: once the batch's new
 * state is shown, hand it to the control that now applies (after Pause, Resume). */
function keepFocus(parts) {
  const lost = document.activeElement === document.body || document.activeElement.disabled;
  const next = [parts.resume, parts.pause, parts.archive]
    .find((c) => c !== parts.pressed && !c.disabled && !c.hidden);
  if (!parts.pressed || !lost || !next) return;
  parts.pressed = null;
  next.focus();
}

export function showBatch(main, params, signal) {
  const parts = batchParts();
  const path = `/batches/${encodeURIComponent(params.id)}`;
  const filter = { status: params.status || "", offset: 0 };
  const onFilter = (status) => { filter.status = status; filter.offset = 0; parts.refresh(); };
  main.append(
    el("h1", {}, "Batch ", el("code", {}, params.id)), parts.summary, parts.error,
    el("div", { class: "actions" }, parts.pause, parts.resume, parts.cancel, parts.archive), parts.note,
    el("h2", {}, "Items"), statusFilter("item-status-filter", ITEM_STATUSES, filter.status, onFilter), parts.items);
  parts.refresh = coalesce(() => refreshBatch(parts, path, filter, signal));
  refreshBeforeUse(parts.archive, async () => (await api("GET", path)).url,
    (error) => fill(parts.note, errorBox(error, "No fresh link")));
  control(parts, parts.pause, path, "pause", "Pause requested: items already rendering finish.");
  control(parts, parts.resume, path, "resume", "Resumed.");
  control(parts, parts.cancel, path, "cancel", "Cancel requested.");
  return follow(`${path}/stream`, parts.refresh, signal);
}
