// Builds the console's vendored files from the pinned packages (package-lock.json):
//   npm ci && npm run build
// writes codemirror.js (one minified ES module), pdf.js and pdf-worker.js (pdf.js's own
// minified builds, copied), vendor-licenses.txt and vendor.sha256 into
// services/gateway/console/. The gateway serves them as they are: no npm at run time, and
// CI never rebuilds them (tests/unit/gateway/test_console_vendor.py checks the hashes).
import { createHash } from "node:crypto";
import { copyFileSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { build } from "esbuild";

const OUT = new URL("../../services/gateway/console/", import.meta.url).pathname;
const MODULES = new URL("./node_modules/", import.meta.url).pathname;

await build({
  entryPoints: ["codemirror-entry.js"], bundle: true, format: "esm", minify: true,
  target: "es2020", outfile: join(OUT, "codemirror.js"), legalComments: "none",
});
copyFileSync(join(MODULES, "pdfjs-dist/build/pdf.min.mjs"), join(OUT, "pdf.js"));
copyFileSync(join(MODULES, "pdfjs-dist/build/pdf.worker.min.mjs"), join(OUT, "pdf-worker.js"));

const lock = JSON.parse(readFileSync("package-lock.json", "utf8"));
const licenses = [];
for (const [path, meta] of Object.entries(lock.packages)) {
  if (!path || path.includes("esbuild") || path.includes("@napi-rs")) continue;
  const folder = join(".", path);
  let text = "";
  for (const name of ["LICENSE", "LICENSE.md", "LICENSE.txt", "LICENCE"]) {
    try { text = readFileSync(join(folder, name), "utf8"); break; } catch { /* next */ }
  }
  if (!text) text = `No licence file in the package; its package.json says ${meta.license}.`;
  licenses.push(`${path.replace("node_modules/", "")} ${meta.version} (${meta.license})\n\n${text.trim()}\n`);
}
writeFileSync(join(OUT, "vendor-licenses.txt"), licenses.join(`\n${"-".repeat(72)}\n\n`));

const sums = ["codemirror.js", "pdf.js", "pdf-worker.js"].map((name) => {
  const digest = createHash("sha256").update(readFileSync(join(OUT, name))).digest("hex");
  return `${digest}  ${name}\n`;
});
writeFileSync(join(OUT, "vendor.sha256"), sums.join(""));
