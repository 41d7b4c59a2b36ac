// Building the page from data without ever parsing data as markup: every value goes in
// as a text node or a property, so `<img onerror=…>` in a job's error stays text.

const SYMBOLS = {
  queued: "…", running: "▶", paused: "‖", done: "✓", failed: "✗", cancelled: "⊘",
};

function setProp(node, name, value) {
  if (value === undefined || value === null || value === false) return;
  if (name === "text") node.textContent = String(value);
  else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
  else if (name === "href" || name === "src") node.setAttribute(name, safeUrl(value));
  else if (["value", "disabled", "checked", "selected", "hidden"].includes(name)) node[name] = value;
  else node.setAttribute(name, value === true ? "" : String(value));
}

function addChild(node, child) {
  if (child === undefined || child === null || child === false) return;
  if (Array.isArray(child)) child.forEach((c) => addChild(node, c));
  else if (child instanceof Node) node.append(child);
  else node.append(document.createTextNode(String(child)));
}

/** `el("a", {href: "#/jobs"}, "Jobs")`: an element with properties and children. */
export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) setProp(node, name, value);
  addChild(node, children);
  return node;
}

/** Replace `node`'s children. */
export function fill(node, ...children) {
  node.replaceChildren();
  addChild(node, children);
  return node;
}

/** Only links this page may follow: its own fragments and paths, and http(s). */
export function safeUrl(value) {
  const text = String(value);
  if (text.startsWith("#") || text.startsWith("/")) return text;
  try {
    const url = new URL(text, location.href);
    return url.protocol === "http:" || url.protocol === "https:" ? url.href : "#";
  } catch {
    return "#";
  }
}

/** A status as a word with a symbol (never by colour alone). */
export function statusBadge(status) {
  const word = status || "unknown";
  return el("span", { class: `status status-${word}`, "data-status": word },
    el("span", { "aria-hidden": "true" }, `${SYMBOLS[word] || "?"} `), word);
}

export function when(iso) {
  if (!iso) return "—";
  return el("time", { datetime: iso }, new Date(iso).toLocaleString());
}

export function size(bytes) {
  if (bytes === null || bytes === undefined) return "—";
  const units = ["B", "KB", "MB", "GB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) { value /= 1000; unit += 1; }
  return `${unit ? value.toFixed(1) : value} ${units[unit]}`;
}

export function number(value, digits = 0) {
  return value === null || value === undefined ? "—" : Number(value).toFixed(digits);
}

/** A table with a caption and column headers; `rows` are arrays of cells. */
export function table(caption, headers, rows, empty = "Nothing here yet.") {
  const head = el("tr", {}, headers.map((h) => el("th", { scope: "col", class: h.num ? "num" : null }, h.label || h)));
  const body = el("tbody");
  for (const row of rows) body.append(el("tr", {}, row));
  if (!rows.length) body.append(el("tr", {}, el("td", { colspan: headers.length }, empty)));
  // in a box of its own that scrolls sideways: a wide table never widens the page
  return el("div", { class: "table-scroll" },
    el("table", {}, el("caption", {}, caption), el("thead", {}, head), body));
}

/** A note above a list that the gateway is away for now and the list tries again (the
 * rows last shown stay); `error` null removes it. */
export function outageNote(region, error) {
  const id = `${region.id}-outage`;
  let note = document.getElementById(id);
  if (!error) { if (note) note.remove(); return; }
  if (!note) {
    note = el("div", { id, class: "message outage", role: "status" });
    region.before(note);
  }
  fill(note, `The gateway cannot be reached right now (${error.message}); trying again every 2 s. `
    + "What is shown may be out of date.");
}

export function facts(pairs) {
  return el("dl", { class: "facts" }, pairs.map(([term, value]) => [el("dt", {}, term), el("dd", {}, value)]));
}

/** An error as the API gave it: its type and its message, as text. */
export function errorBox(error, title = "Error") {
  return el("div", { class: "error", role: "alert" },
    el("p", {}, el("strong", {}, `${title}: `), el("code", { class: "error-type" }, error.type || "error")),
    el("p", { class: "error-message" }, error.message || ""));
}

let fieldCount = 0;

/** A labelled control: `field("Data (JSON)", el("textarea", {...}))`. */
export function field(label, control, hint) {
  fieldCount += 1;
  const id = control.id || `f${fieldCount}`;
  control.id = id;
  const hintNode = hint ? el("p", { class: "hint", id: `${id}-hint` }, hint) : null;
  if (hintNode) control.setAttribute("aria-describedby", hintNode.id);
  return el("div", { class: "field" }, el("label", { for: id }, label), control, hintNode);
}

export function announce(text) {
  fill(document.getElementById("announce"), text);
}

/** A pager: Previous/Next buttons over `limit`/`offset`/`next_offset`. */
export function pager(page, go) {
  const back = Math.max(0, page.offset - page.limit);
  return el("nav", { class: "pager", "aria-label": "Pages" },
    el("button", { type: "button", class: "secondary", disabled: page.offset === 0, onclick: () => go(back) }, "Previous"),
    el("span", {}, `From ${page.offset + 1}`),
    el("button", { type: "button", class: "secondary", disabled: page.next_offset === null || page.next_offset === undefined, onclick: () => go(page.next_offset) }, "Next"));
}

/** The options of a `<select>`: `[value, label]` pairs, `chosen` selected. */
export function options(pairs, chosen) {
  return pairs.map(([value, label]) => el("option", { value, selected: value === chosen }, label));
}
