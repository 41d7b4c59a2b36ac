// The template editor: body, header, footer, sample data (JSON) and assets in CodeMirror 6
// editors beside a live PDF preview. Every change (debounced) submits a preview job
// (`"preview": true`: not billed, not listed, a newer one cancels the older) and stops
// following the previous one; the PDF is drawn page by page with pdf.js, each page a
// canvas. A failure is marked at its line in the editor it came from. The version's bundled
// files (logo, fonts, CSS) go with every preview and every saved version by reference
// (`template_files`, `keep_files`), unless dropped in the Assets tab. Loaded on demand
// (console.js imports it when the route is opened): the other views never load the
// vendored modules.

import * as cm from "./codemirror.js";
import * as pdfjs from "./pdf.js";
import { api, coalesce, follow, query } from "./api.js";
import { announce, el, errorBox, field, fill, options, when } from "./dom.js";
import { TERMINAL } from "./jobs.js";
import { compareView } from "./versions.js";

pdfjs.GlobalWorkerOptions.workerSrc = "/console/pdf-worker.js";

export const DEBOUNCE_MS = 500;
const FORMATS = ["A4", "A5", "A3", "Letter", "Legal"];
const PARTS = [
  ["body", "Body"], ["header", "Header"], ["footer", "Footer"], ["data", "Sample data"], ["assets", "Assets"],
];
const ERROR_PART = { header_template: "header", footer_template: "footer" };

/** The editor's look (in its shadow root, where console.css does not reach). */
const THEME = cm.EditorView.theme({
  "&": { height: "55vh", minHeight: "16rem", fontSize: "0.9rem", backgroundColor: "#fff" },
  "&.cm-focused": { outline: "3px solid #b3261e" },
  ".cm-scroller": { fontFamily: 'ui-monospace, "DejaVu Sans Mono", Menlo, monospace' },
  ".cm-gutters": { backgroundColor: "#f3f5f7", color: "#4a5360", borderRight: "1px solid #c9d0d8" },
});

/** Where a preview's error points: the editor (`body`, `header`, `footer`) and the line
 * (null when the message names none): "header_template: line 3: 'x' is undefined". */
export function errorPlace(message) {
  const prefix = message.match(/^(header_template|footer_template): /);
  const part = prefix ? ERROR_PART[prefix[1]] : "body";
  const line = message.match(/\bline (\d+)\b/);
  return { part, line: line ? Number(line[1]) : null };
}

/** The body's line of line `n` of an inline script, as Chromium counts a page error's
 * line (from the script's start): the first inline `<script>` long enough to hold it
 * (the rendered page's lines are the template's unless the template adds or drops lines
 * above it); `n` itself when the body has no such script. */
export function scriptLine(body, n) {
  const opening = /<script\b(?![^>]*\bsrc=)[^>]*>/gi;
  for (const found of body.matchAll(opening)) {
    const start = found.index + found[0].length;
    const end = body.indexOf("</script", start);
    const content = body.slice(start, end < 0 ? undefined : end);
    if (content.split("\n").length >= n) return body.slice(0, start).split("\n").length + n - 1;
  }
  return n;
}

/** A CodeMirror editor in a shadow root of `host`: there its styles are constructed
 * style sheets, which the console's policy admits; in the document it would write `<style>`
 * elements, which `style-src 'self'` refuses (and the editor would show unstyled). */
function makeEditor(host, text, language, onChange, label) {
  const root = host.attachShadow({ mode: "open" });
  return new cm.EditorView({
    parent: root,
    root,
    state: cm.EditorState.create({
      doc: text,
      extensions: [
        cm.lineNumbers(), cm.highlightActiveLineGutter(), cm.highlightSpecialChars(), cm.history(),
        cm.drawSelection(), cm.indentOnInput(), cm.bracketMatching(), cm.highlightActiveLine(),
        cm.highlightSelectionMatches(), cm.syntaxHighlighting(cm.defaultHighlightStyle), cm.lintGutter(),
        cm.keymap.of([...cm.defaultKeymap, ...cm.historyKeymap, ...cm.searchKeymap, cm.indentWithTab]),
        language, cm.EditorView.lineWrapping, THEME,
        cm.EditorView.contentAttributes.of({ "aria-label": label }),
        cm.EditorView.updateListener.of((update) => { if (update.docChanged) onChange(); }),
      ],
    }),
  });
}

/** Mark `message` at `line` (1-based, clamped to the document) of `view`; none if null. */
function mark(view, line, message) {
  markAll(view, line === null ? [] : [{ line, message }]);
}

/** Mark each `{line, message}` in `view` (and no other line). */
function markAll(view, marks) {
  const doc = view.state.doc;
  const diagnostics = marks.map(({ line, message }) => {
    const at = doc.line(Math.min(Math.max(line, 1), doc.lines));
    return { from: at.from, to: at.to, severity: "error", message };
  });
  view.dispatch(cm.setDiagnostics(view.state, diagnostics));
}

/** Draw every page of `bytes` (a PDF) as a canvas, a gap between pages. */
async function drawPdf(region, bytes, signal) {
  const task = pdfjs.getDocument({ data: bytes, isEvalSupported: false, enableXfa: false });
  const pdf = await task.promise;
  try {
    const width = Math.max(200, region.clientWidth - 16);
    const canvases = [];
    for (let n = 1; n <= pdf.numPages; n += 1) {
      if (signal.aborted) return;
      const page = await pdf.getPage(n);
      const base = page.getViewport({ scale: 1 });
      const scale = width / base.width;
      const viewport = page.getViewport({ scale: scale * (window.devicePixelRatio || 1) });
      const canvas = el("canvas", { class: "pdf-page", "aria-label": `Page ${n} of ${pdf.numPages}`, role: "img" });
      canvas.width = Math.floor(viewport.width);
      canvas.height = Math.floor(viewport.height);
      canvas.style.width = `${Math.floor(base.width * scale)}px`;
      await page.render({ canvasContext: canvas.getContext("2d"), viewport }).promise;
      canvases.push(canvas);
    }
    if (!signal.aborted) fill(region, canvases);
  } finally {
    pdf.destroy();
  }
}

class Editor {
  constructor(template, signal) {
    this.template = template;
    this.signal = signal;
    this.timer = null;
    this.current = null; // the AbortController of the preview being followed
    this.previews = 0;
    this.views = {};
  }

  build() {
    const t = this.template;
    const changed = () => this.schedule();
    this.panels = {};
    for (const [part] of PARTS) this.panels[part] = el("div", { class: "editor-panel", id: `editor-${part}`, role: "tabpanel" });
    const html = cm.html();
    this.views.body = makeEditor(this.panels.body, t.body, html, changed, "Body template");
    this.views.header = makeEditor(this.panels.header, t.header || "", html, changed, "Header template");
    this.views.footer = makeEditor(this.panels.footer, t.footer || "", html, changed, "Footer template");
    this.views.data = makeEditor(this.panels.data, sampleData(t), cm.json(), changed, "Sample data (JSON)");
    this.panels.assets.append(this.assetsPanel());
    this.tabs = el("div", { class: "tabs", role: "tablist", "aria-label": "Template parts" },
      PARTS.map(([part, label]) => el("button", {
        type: "button", role: "tab", id: `tab-${part}`, class: "tab", "aria-controls": `editor-${part}`,
        onclick: () => this.show(part),
      }, label)));
    this.show("body");
    return el("div", { class: "editor-parts" }, this.tabs, Object.values(this.panels));
  }

  /** The Assets tab: the files the version bundles, each kept by the saved version and
   * given to previews unless dropped here, and stored assets to bundle besides. */
  assetsPanel() {
    this.assetNames = el("input", { type: "text", id: "editor-asset-names", class: "mono", autocomplete: "off" });
    this.assetNames.addEventListener("change", () => this.schedule());
    const files = this.template.files || [];
    this.dropped = new Set();
    const row = (f) => {
      const label = `${f.name} (${f.content_type}, ${f.size} B)`;
      const text = el("span", { class: "mono" }, label);
      const toggle = el("button", { type: "button", class: "secondary small", "aria-label": `Drop ${f.name}` }, "Drop");
      toggle.addEventListener("click", () => {
        const drop = !this.dropped.has(f.name);
        if (drop) this.dropped.add(f.name); else this.dropped.delete(f.name);
        toggle.setAttribute("aria-label", `${drop ? "Keep" : "Drop"} ${f.name}`);
        fill(toggle, drop ? "Keep" : "Drop");
        text.classList.toggle("dropped", drop);
        fill(status, drop ? " dropped: the saved version will not bundle it" : "");
        this.schedule();
      });
      const status = el("span", { class: "hint" });
      return el("li", { "data-name": f.name }, text, " ", toggle, status);
    };
    return el("div", { class: "assets" },
      el("p", { class: "hint" }, files.length
        ? `Version ${this.template.version} bundles these files; the saved version keeps them, and previews get them, unless you drop them:`
        : `Version ${this.template.version} bundles no files.`),
      files.length ? el("ul", { id: "editor-files" }, files.map(row)) : null,
      field("Stored assets a saved version bundles", this.assetNames,
        "Names of assets uploaded with POST /assets, separated by commas (logo.png, brand.woff2@2). Previews get them too."));
  }

  /** The stored asset names typed in the Assets tab. */
  assetList() {
    return this.assetNames.value.split(",").map((n) => n.trim()).filter(Boolean);
  }

  /** The version's files the editor keeps (all but those dropped), by reference: `null`
   * when the version bundles none. */
  keptFiles() {
    const files = this.template.files || [];
    if (!files.length) return null;
    return this.previewFiles();
  }

  /** A preview's `template_files`: the version's files not dropped (`names: []` when it
   * bundles none), which also names the template the draft is of, so previews of two
   * templates edited through one key (two tabs) do not cancel each other. */
  previewFiles() {
    const names = (this.template.files || []).map((f) => f.name).filter((n) => !this.dropped.has(n));
    return { template_id: this.template.id, version: this.template.version, names };
  }

  show(part) {
    for (const [name] of PARTS) {
      const on = name === part;
      this.panels[name].hidden = !on;
      this.tabs.querySelector(`#tab-${name}`).setAttribute("aria-selected", String(on));
    }
    if (this.views[part]) this.views[part].requestMeasure();
  }

  text(part) {
    return this.views[part].state.doc.toString();
  }

  setTexts(version) {
    for (const part of ["body", "header", "footer"]) {
      const view = this.views[part];
      view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: version[part] || "" } });
    }
  }

  pageOptions() {
    const o = this.controls;
    const margin = { top: o.top.value, right: o.right.value, bottom: o.bottom.value, left: o.left.value };
    const options = {
      format: o.format.value, landscape: o.orientation.value === "landscape", margin, diagnostics: true,
    }; // diagnostics: the page's script errors, with their lines
    const header = this.text("header");
    const footer = this.text("footer");
    if (header.trim()) options.header_template = header;
    if (footer.trim()) options.footer_template = footer;
    return options;
  }

  controlsForm() {
    const length = (id, value) => el("input", { type: "text", id, value, size: 6, class: "mono", autocomplete: "off" });
    this.controls = {
      format: el("select", { id: "page-format" }, options(FORMATS.map((f) => [f, f]), "A4")),
      orientation: el("select", { id: "page-orientation" }, options([["portrait", "Portrait"], ["landscape", "Landscape"]], "portrait")),
      top: length("margin-top", "15mm"), right: length("margin-right", "12mm"),
      bottom: length("margin-bottom", "15mm"), left: length("margin-left", "12mm"),
    };
    const c = this.controls;
    const form = el("form", { class: "inline page-controls", "aria-label": "Page" },
      field("Page size", c.format), field("Orientation", c.orientation),
      field("Top", c.top), field("Right", c.right), field("Bottom", c.bottom), field("Left", c.left));
    form.addEventListener("submit", (event) => event.preventDefault());
    form.addEventListener("change", () => this.schedule());
    return form;
  }

  /** A preview DEBOUNCE_MS after the last change; the one being followed stops now. */
  schedule() {
    clearTimeout(this.timer);
    if (this.current) this.current.abort();
    this.state("Waiting for you to stop typing…");
    this.timer = setTimeout(() => this.preview(), DEBOUNCE_MS);
  }

  state(text) {
    fill(this.status, text);
  }

  dataOrMark() {
    try {
      const data = JSON.parse(this.text("data"));
      if (data === null || typeof data !== "object" || Array.isArray(data)) throw new SyntaxError("the sample data must be a JSON object");
      mark(this.views.data, null);
      return data;
    } catch (error) {
      const at = error.message.match(/line (\d+)/);
      mark(this.views.data, at ? Number(at[1]) : 1, error.message);
      this.showError({ type: "invalid_data", message: `Sample data: ${error.message}` }, "data");
      return null;
    }
  }

  async preview() {
    if (this.signal.aborted) return;
    const data = this.dataOrMark();
    if (data === null) return;
    const controller = new AbortController();
    this.current = controller;
    const signal = AbortSignal.any([controller.signal, this.signal]);
    const body = { template: this.text("body"), data, preview: true, options: this.pageOptions() };
    // the version's files, so `<img src="logo.png">` shows; and which template this is
    body.template_files = this.previewFiles();
    const names = this.assetList();
    if (names.length) body.assets = names;
    this.state("Rendering…");
    try {
      const job = await api("POST", "/jobs", body, signal);
      await this.follow(job.id, signal);
    } catch (error) {
      if (signal.aborted) return;
      this.showError(error, previewPart(error.field));
    }
  }

  async follow(jobId, signal) {
    const path = `/jobs/${encodeURIComponent(jobId)}`;
    let shown = false;
    const refresh = coalesce(async () => {
      if (shown) return true;
      const job = await api("GET", path, undefined, signal);
      if (signal.aborted) return true;
      if (job.status === "done") { shown = true; await this.showPdf(job, signal); }
      else if (job.error) { shown = true; this.showError(job.error); }
      return TERMINAL.has(job.status);
    });
    await follow(`${path}/stream`, refresh, signal);
  }

  async showPdf(job, signal) {
    const response = await fetch(job.url, { signal, cache: "no-store" });
    if (!response.ok) throw new Error(`the preview could not be fetched (HTTP ${response.status})`);
    const bytes = new Uint8Array(await response.arrayBuffer());
    await drawPdf(this.pages, bytes, signal);
    if (signal.aborted) return;
    for (const part of ["body", "header", "footer"]) mark(this.views[part], null);
    fill(this.problem);
    this.previews += 1;
    this.pages.dataset.previews = String(this.previews);
    this.pages.dataset.job = job.id;
    this.state(`Preview ${this.previews}: ${job.pages ?? this.pages.children.length} page(s), rendered ${new Date().toLocaleTimeString()}.`);
    await this.showPageErrors(job.id, signal);
  }

  /** The page's own script errors of the preview's attempt, marked at their lines in the
   * body (`scriptLine`). */
  async showPageErrors(jobId, signal) {
    let found;
    try {
      found = await api("GET", `/jobs/${encodeURIComponent(jobId)}/diagnostics`, undefined, signal);
    } catch {
      return; // no diagnosis kept: nothing to mark
    }
    const attempt = found.attempts[found.attempts.length - 1];
    const errors = (attempt && attempt.errors) || [];
    const body = this.text("body");
    const placed = errors.map((e) => ({ ...e, at: e.line ? scriptLine(body, e.line) : null }));
    markAll(this.views.body, placed.filter((e) => e.at).map((e) => ({ line: e.at, message: `Page script error: ${e.text}` })));
    if (!errors.length) return;
    fill(this.problem, el("div", { class: "error", role: "alert", id: "page-errors" },
      el("p", {}, el("strong", {}, "The page's scripts threw (the PDF rendered):")),
      el("ul", {}, placed.map((e) => el("li", { "data-line": e.at || "" }, e.at ? `line ${e.at}: ${e.text}` : e.text)))));
  }

  showError(error, partHint) {
    const place = errorPlace(error.message || "");
    const part = partHint || place.part;
    for (const name of ["body", "header", "footer"]) mark(this.views[name], name === part ? place.line : null, error.message);
    const where = place.line === null ? "" : ` (${part}, line ${place.line})`;
    fill(this.problem, errorBox(error, `Preview failed${where}`));
    if (place.line !== null) this.problem.dataset.line = String(place.line);
    else delete this.problem.dataset.line;
    this.problem.dataset.part = part;
    this.state("The last change did not render; the preview below is the one before.");
    if (this.views[part]) this.show(part);
  }

  /** Store the editor's texts as the next version, keeping the files of the version in
   * the editor not dropped (`keep`: another version's instead, for a restore). */
  async save(button, keep = this.keptFiles()) {
    button.disabled = true;
    fill(this.saved);
    const body = { name: this.template.name, body: this.text("body"), assets: this.assetList() };
    if (keep) body.keep_files = keep;
    const header = this.text("header");
    const footer = this.text("footer");
    if (header.trim()) body.header = header;
    if (footer.trim()) body.footer = footer;
    try {
      const created = await api("POST", "/templates", body, this.signal);
      announce(`Saved as version ${created.version}.`);
      location.hash = `#/templates/${encodeURIComponent(created.id)}/edit${query({ version: created.version })}`;
    } catch (error) {
      if (!this.signal.aborted) fill(this.saved, errorBox(error, "Not saved"));
      button.disabled = false;
    }
  }
}

/** The editor a preview's refused field belongs to. */
function previewPart(fieldName) {
  if (fieldName === "options.header_template") return "header";
  if (fieldName === "options.footer_template") return "footer";
  if (fieldName && (fieldName.startsWith("assets") || fieldName.startsWith("template_files"))) return "assets";
  return "body";
}

function sampleData(template) {
  const stored = sessionStorage.getItem(`pressroom.console.sample.${template.id}`);
  return stored || "{\n  \n}";
}

function keepSample(editor) {
  const view = editor.views.data;
  const key = `pressroom.console.sample.${editor.template.id}`;
  editor.signal.addEventListener("abort", () => sessionStorage.setItem(key, view.state.doc.toString()), { once: true });
}

function versionsSection(editor) {
  const t = editor.template;
  const compared = el("div", { id: "version-compare" });
  const rows = [...t.versions].reverse().map((v) => {
    const label = `Version ${v.version}`;
    const shown = v.version === t.version;
    return el("li", { "data-version": v.version },
      shown ? el("strong", { "aria-current": "true" }, `${label} (in the editor)`) : el("a", { href: `#/templates/${encodeURIComponent(t.id)}/edit${query({ version: v.version })}` }, label),
      " ", when(v.created_at), " ",
      el("button", { type: "button", class: "secondary small", onclick: () => compareView(compared, t, v.version, editor) }, "Compare"),
      shown ? null : el("button", { type: "button", class: "secondary small", onclick: (event) => restore(editor, v.version, event.currentTarget) }, "Restore"));
  });
  return el("section", { class: "versions-panel", "aria-labelledby": "versions-title" },
    el("h2", { id: "versions-title" }, "Versions"), el("ul", { class: "versions", id: "editor-versions" }, rows), compared);
}

/** Load `version` into the editors and save it as the newest version. */
async function restore(editor, version, button) {
  button.disabled = true;
  try {
    const old = await api("GET", `/templates/${encodeURIComponent(editor.template.id)}${query({ version })}`, undefined, editor.signal);
    editor.setTexts(old);
    const keep = old.files.length ? { template_id: old.id, version: old.version } : null; // all its files
    await editor.save(button, keep);
  } catch (error) {
    if (!editor.signal.aborted) fill(editor.saved, errorBox(error, "Not restored"));
    button.disabled = false;
  }
}

export async function showEditor(main, params, signal) {
  main.append(el("p", {}, "Loading…"));
  let template;
  try {
    template = await api("GET", `/templates/${encodeURIComponent(params.id)}${query({ version: params.version })}`, undefined, signal);
  } catch (error) {
    if (!signal.aborted) fill(main, el("h1", {}, "Template editor"), errorBox(error));
    return;
  }
  const editor = new Editor(template, signal);
  editor.status = el("p", { id: "preview-status", class: "hint", role: "status" });
  editor.problem = el("div", { id: "editor-error" });
  editor.saved = el("div", { id: "editor-saved" });
  editor.pages = el("div", { id: "preview-pages", class: "pdf-pages", "aria-label": "Preview, page by page" });
  const parts = editor.build();
  keepSample(editor);
  const saveButton = el("button", { type: "button", id: "save-version" }, "Save as new version");
  saveButton.addEventListener("click", () => editor.save(saveButton));
  signal.addEventListener("abort", () => { clearTimeout(editor.timer); Object.values(editor.views).forEach((v) => v.destroy()); }, { once: true });
  fill(main,
    el("h1", {}, "Edit ", el("q", {}, template.name), el("span", { class: "hint" }, ` from version ${template.version}`)),
    el("p", {}, el("a", { href: `#/templates/${encodeURIComponent(template.id)}` }, "Back to the template"),
      " · jobs render it with ", el("code", {}, `"template_name": ${JSON.stringify(template.name)}`)),
    editor.controlsForm(),
    el("div", { class: "editor-layout" },
      el("div", { class: "editor-side" }, parts, el("div", { class: "save-row" }, saveButton, editor.saved), versionsSection(editor)),
      el("section", { class: "preview-side", "aria-labelledby": "live-preview-title" },
        el("h2", { id: "live-preview-title" }, "Live preview (PDF)"), editor.status, editor.problem, editor.pages)));
  editor.preview();
}
