// Stored templates: the list (with "New template": a name, then the editor), one
// template's versions and body, and a preview: a PNG job rendered from the chosen version
// with sample data typed here, shown when it is done.

import { api, coalesce, follow, isOutage, query } from "./api.js";
import {
  announce, el, errorBox, facts, field, fill, outageNote, pager, statusBadge, table, when,
} from "./dom.js";
import { parseData, TERMINAL } from "./jobs.js";

const PAGE = 20;

function templateLink(t, version) {
  return `#/templates/${encodeURIComponent(t.id)}${query({ version })}`;
}

/** Show the list; false while the gateway is away (the caller tries again). */
async function loadTemplates(region, offset, signal) {
  try {
    const page = await api("GET", `/templates${query({ limit: PAGE, offset })}`, undefined, signal);
    outageNote(region, null);
    const rows = page.templates.map((t) => [
      el("td", {}, el("a", { href: templateLink(t) }, t.name)), el("td", { class: "mono" }, t.id),
      el("td", { class: "num" }, t.latest_version), el("td", {}, when(t.updated_at)),
    ]);
    const go = (next) => { location.hash = `#/templates${query({ offset: next })}`; };
    fill(region, table("Stored templates, most recently updated first",
      ["Name", "Id", { label: "Latest version", num: true }, "Updated"], rows,
      "No stored templates: POST /templates stores one."), pager(page, go));
  } catch (error) {
    if (signal.aborted) return true;
    if (isOutage(error)) { outageNote(region, error); return false; }
    fill(region, errorBox(error));
  }
  return true;
}

/** The first version of a template made by "New template": a body to start editing. */
const STARTER = "<h1>{{ title | default('Untitled') }}</h1>\n<p>Start writing the template here.</p>\n";

/** "New template": asks for a name, stores version 1 (`"new": true`: a name the tenant
 * has already is a 409, not its next version) and opens it in the editor; the API's
 * refusal (a name taken, too long, blank) shows beside the name. */
function newTemplate() {
  const name = el("input", { type: "text", id: "new-template-name", name: "name", autocomplete: "off", required: true });
  const problem = el("div", { id: "new-template-error", role: "alert" });
  const cancel = el("button", { type: "button", class: "secondary" }, "Cancel");
  const form = el("form", { id: "new-template-form", class: "inline", hidden: true, "aria-label": "New template" },
    field("Name of the new template", name, "Jobs name it as template_name."),
    el("button", { type: "submit", id: "create-template" }, "Create and edit"), cancel);
  const open = el("button", { type: "button", id: "new-template", "aria-expanded": "false", "aria-controls": "new-template-form" }, "New template");
  const show = (on) => {
    form.hidden = !on;
    open.setAttribute("aria-expanded", String(on));
    fill(problem);
    name.removeAttribute("aria-invalid");
    if (on) name.focus(); else open.focus();
  };
  open.addEventListener("click", () => show(form.hidden));
  cancel.addEventListener("click", () => show(false));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    fill(problem);
    name.removeAttribute("aria-invalid");
    try {
      const created = await api("POST", "/templates", { name: name.value, body: STARTER, new: true });
      announce(`Template ${created.name} created.`);
      location.hash = `#/templates/${encodeURIComponent(created.id)}/edit`;
    } catch (error) {
      const taken = error.status === 409;
      if (taken || error.field === "name") name.setAttribute("aria-invalid", "true");
      const message = taken ? `A template is named ${JSON.stringify(name.value)} already: choose another name, or open that one from the list.` : `Not created: ${error.message}`;
      fill(problem, el("div", { class: "error" }, el("p", { class: "error-message" }, message)));
      name.focus();
    }
  });
  return el("div", { class: "new-template" }, open, form, problem);
}

export function listTemplates(main, params, signal) {
  const offset = Number(params.offset || 0);
  const region = el("div", { id: "templates" }, el("p", {}, "Loading…"));
  main.append(el("h1", {}, "Templates"), newTemplate(), region);
  return follow(null, coalesce(() => loadTemplates(region, offset, signal)), signal);
}

function versionList(template) {
  return el("ul", { class: "versions" }, template.versions.map((v) => {
    const label = `Version ${v.version}, ${new Date(v.created_at).toLocaleString()}`;
    const current = v.version === template.version;
    return el("li", {}, current
      ? el("strong", { "aria-current": "true" }, `${label} (shown)`)
      : el("a", { href: templateLink(template, v.version) }, label));
  }));
}

/** Follow the preview job until it ends; the image when it is done, its error if not. */
async function watchPreview(region, jobId, alt, signal) {
  const path = `/jobs/${encodeURIComponent(jobId)}`;
  const refresh = coalesce(async () => {
    const job = await api("GET", path, undefined, signal);
    if (job.status === "done") fill(region, el("img", { class: "preview", id: "preview-image", src: job.url, alt }));
    else if (job.error) fill(region, errorBox(job.error, "Preview failed"));
    else fill(region, el("p", {}, "Rendering… ", statusBadge(job.status)));
    return TERMINAL.has(job.status);
  });
  try {
    await follow(`${path}/stream`, refresh, signal);
  } catch (error) {
    fill(region, errorBox(error));
  }
}

function previewForm(template, signal) {
  const data = el("textarea", { id: "preview-data", rows: 6, value: "{}" });
  const result = el("div", { id: "preview-result", "aria-live": "polite" });
  const problem = el("div", { role: "alert" });
  const form = el("form", { id: "preview", "aria-labelledby": "preview-title" },
    el("h2", { id: "preview-title" }, "Preview"),
    field("Sample data (JSON)", data, "Rendered as a PNG image by a job of its own (it counts in usage)."),
    problem, el("button", { type: "submit" }, "Render preview"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    fill(problem);
    try {
      const body = { template_id: template.id, template_version: template.version, data: parseData(data.value), options: { output: "png" } };
      const job = await api("POST", "/jobs", body);
      announce("Preview submitted.");
      fill(result, el("p", {}, "Rendering…"));
      await watchPreview(result, job.id, `Preview of ${template.name}, version ${template.version}`, signal);
    } catch (error) {
      fill(problem, error.type ? errorBox(error, "Not submitted") : el("div", { class: "error" }, error.message));
    }
  });
  return el("section", { class: "card" }, form, result);
}

export async function showTemplate(main, params, signal) {
  main.append(el("p", {}, "Loading…"));
  let template;
  try {
    template = await api("GET", `/templates/${encodeURIComponent(params.id)}${query({ version: params.version })}`, undefined, signal);
  } catch (error) {
    if (!signal.aborted) fill(main, el("h1", {}, "Template"), errorBox(error));
    return;
  }
  fill(main,
    el("h1", {}, "Template ", el("q", {}, template.name)),
    facts([["Id", el("code", {}, template.id)], ["Version", template.version], ["Created", when(template.created_at)]]),
    el("p", {}, el("a", { class: "button", id: "open-editor", href: `#/templates/${encodeURIComponent(template.id)}/edit${query({ version: template.version })}` }, "Open in the editor")),
    el("div", { class: "columns" },
      el("div", {},
        el("h2", {}, "Versions"), versionList(template),
        el("h2", {}, "Body"), el("pre", { id: "template-body" }, template.body),
        template.header ? [el("h2", {}, "Header"), el("pre", {}, template.header)] : null,
        template.footer ? [el("h2", {}, "Footer"), el("pre", {}, template.footer)] : null),
      previewForm(template, signal)));
}
