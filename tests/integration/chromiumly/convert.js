// chromiumly (npm, pinned in package.json) against Pressroom's Gotenberg routes: one
// call per argument, each writing what it got. Run by test_gotenberg_clients.py with
// ENDPOINT, KEY and OUT set; prints one JSON line per call: {name, ok, error?}.
const fs = require("fs");
const path = require("path");
const { Chromiumly, HtmlConverter, UrlConverter, PDFEngines } = require("chromiumly");

Chromiumly.configure({ endpoint: process.env.ENDPOINT, username: "any", password: process.env.KEY });
const out = process.env.OUT;
const html = path.join(out, "index.html");
fs.writeFileSync(
  html,
  "<!doctype html><title>Chromiumly</title><h1>Invoice INV-2026-0099</h1><img src='logo.svg'>"
);
const logo = path.join(out, "logo.svg");
fs.writeFileSync(logo, "<svg xmlns='http://www.w3.org/2000/svg' width='10' height='10'/>");

const calls = {
  html: () =>
    new HtmlConverter().convert({
      html,
      assets: [{ file: logo, name: "logo.svg" }],
      properties: {
        size: { width: "210mm", height: "297mm" },
        margins: { top: "1cm", bottom: "1cm", left: 0.5, right: 0.5 },
        landscape: true,
        printBackground: true,
      },
      metadata: { Title: "From chromiumly", Author: "Pressroom" },
      waitDelay: "100ms",
      trace: "chromiumly-trace",
    }),
  url: () => new UrlConverter().convert({ url: process.env.PAGE_URL, emulatedMediaType: "screen" }),
  page: () =>
    new HtmlConverter().convert({
      html,
      assets: [{ file: logo, name: "logo.svg" }],
      userAgent: "Bot/1",
      extraHttpHeaders: { "X-Tenant": "acme;scope=^https://assets\\.example\\.com/" },
      cookies: [{ name: "session", value: "s1", domain: "assets.example.com" }],
      failOnConsoleExceptions: true,
    }),
  refused: () => new HtmlConverter().convert({ html, pdfFormat: "PDF/A-1b" }),
};

(async () => {
  for (const name of process.argv.slice(2)) {
    try {
      const pdf = await calls[name]();
      fs.writeFileSync(path.join(out, `${name}.pdf`), pdf);
      console.log(JSON.stringify({ name, ok: true }));
    } catch (error) {
      console.log(JSON.stringify({ name, ok: false, error: String(error && error.message) }));
    }
  }
})();
