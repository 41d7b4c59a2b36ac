// Comparing a stored version of a template with what the editor holds: a line diff of its
// body, header and footer, each line marked as kept, removed (only in the version) or
// added (only in the editor), as text and a symbol, never by colour alone.

import { api, query } from "./api.js";
import { el, errorBox, fill } from "./dom.js";

/** The lines of `a` and `b` as [mark, line] pairs: " " in both, "-" only in a, "+" only
 * in b (a longest common subsequence; templates are short enough for its n·m table). */
export function lineDiff(a, b) {
  const x = a.split("\n");
  const y = b.split("\n");
  const n = x.length;
  const m = y.length;
  const common = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i -= 1) {
    for (let j = m - 1; j >= 0; j -= 1) {
      common[i][j] = x[i] === y[j] ? common[i + 1][j + 1] + 1 : Math.max(common[i + 1][j], common[i][j + 1]);
    }
  }
  const out = [];
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && x[i] === y[j]) { out.push([" ", x[i]]); i += 1; j += 1; }
    else if (j < m && (i === n || common[i][j + 1] >= common[i + 1][j])) { out.push(["+", y[j]]); j += 1; }
    else { out.push(["-", x[i]]); i += 1; }
  }
  return out;
}

const WORDS = { " ": "kept", "-": "removed", "+": "added" };

function diffBlock(title, before, after) {
  const lines = lineDiff(before || "", after || "");
  const changed = lines.filter(([markChar]) => markChar !== " ").length;
  return el("div", { class: "diff-part" },
    el("h3", {}, `${title}: ${changed ? `${changed} line(s) differ` : "the same"}`),
    changed ? el("pre", { class: "diff" }, lines.map(([markChar, line]) => el("span", {
      class: `diff-line diff-${WORDS[markChar]}`, title: WORDS[markChar],
    }, `${markChar} ${line}\n`))) : null);
}

/** Show, in `region`, `version` of `template` against the editor's texts. */
export async function compareView(region, template, version, editor) {
  fill(region, el("p", {}, "Loading…"));
  try {
    const old = await api("GET", `/templates/${encodeURIComponent(template.id)}${query({ version })}`, undefined, editor.signal);
    fill(region, el("h3", { id: "compare-title" }, `Version ${version} (−) against the editor (+)`),
      diffBlock("Body", old.body, editor.text("body")),
      diffBlock("Header", old.header, editor.text("header")),
      diffBlock("Footer", old.footer, editor.text("footer")));
  } catch (error) {
    if (!editor.signal.aborted) fill(region, errorBox(error, "Cannot compare"));
  }
}
