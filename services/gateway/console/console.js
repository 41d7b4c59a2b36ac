// The console's entry: signing in and out, and routing `#/…` fragments to views. Each
// view gets the `<main>` element, the route's parameters and an AbortSignal that ends its
// live updates when the person goes elsewhere.

import { api, ApiError, session } from "./api.js";
import { el, field, fill, announce } from "./dom.js";
import { listBatches, showBatch } from "./batches.js";
import { listJobs, showJob } from "./jobs.js";
import { listTemplates, showTemplate } from "./templates.js";
import { showUsage } from "./usage.js";

/** The template editor, loaded when first opened: the other views never load CodeMirror
 * and pdf.js. */
async function editTemplate(main, params, signal) {
  const { showEditor } = await import("./editor.js");
  if (!signal.aborted) await showEditor(main, params, signal);
}

const ROUTES = [
  [/^\/jobs\/([^/]+)$/, "jobs", showJob],
  [/^\/jobs$/, "jobs", listJobs],
  [/^\/batches\/([^/]+)$/, "batches", showBatch],
  [/^\/batches$/, "batches", listBatches],
  [/^\/templates\/([^/]+)\/edit$/, "templates", editTemplate],
  [/^\/templates\/([^/]+)$/, "templates", showTemplate],
  [/^\/templates$/, "templates", listTemplates],
  [/^\/usage$/, "usage", showUsage],
];

const main = document.getElementById("main");
const nav = document.getElementById("nav");
const signOutButton = document.getElementById("sign-out");
let current = null; // the AbortController of the view on screen
let signingIn = false; // a 401 then is the key typed being wrong, not a key revoked

function parseHash() {
  const [path, search = ""] = location.hash.slice(1).split("?");
  return { path, params: Object.fromEntries(new URLSearchParams(search)) };
}

function markSection(section) {
  for (const link of nav.querySelectorAll("a")) {
    if (link.dataset.section === section) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
}

function route() {
  if (!session.key) return showSignIn();
  const { path, params } = parseHash();
  const found = ROUTES.find(([pattern]) => pattern.test(path));
  if (!found) { location.hash = "#/jobs"; return undefined; }
  const [pattern, section, view] = found;
  const [, id] = path.match(pattern);
  if (current) current.abort();
  current = new AbortController();
  nav.hidden = false;
  signOutButton.hidden = false;
  markSection(section);
  fill(main);
  return view(main, { ...params, id: id && decodeURIComponent(id) }, current.signal);
}

function showSignIn(message) {
  if (current) current.abort();
  current = null;
  nav.hidden = true;
  signOutButton.hidden = true;
  const key = el("input", { type: "password", id: "api-key", name: "key", autocomplete: "off", required: true });
  const problem = el("div", { id: "sign-in-error", role: "alert" });
  const form = el("form", { class: "card narrow", id: "sign-in", "aria-labelledby": "sign-in-title" },
    el("h1", { id: "sign-in-title" }, "Sign in"),
    el("p", { class: "hint" }, "With an API key of your tenant. It is kept in this tab only, until you sign out or close it."),
    field("API key", key), problem,
    el("button", { type: "submit" }, "Sign in"));
  form.addEventListener("submit", (event) => { event.preventDefault(); signIn(key, problem); });
  fill(main, form);
  if (message) fill(problem, el("div", { class: "error" }, message));
  key.focus();
}

/** Try the key on a route every key reaches (a 403 is a real key without that scope). */
async function signIn(input, problem) {
  const key = input.value.trim();
  if (!key) return;
  fill(problem);
  session.set(key);
  signingIn = true;
  try {
    await api("GET", "/batches?limit=1");
  } catch (error) {
    if (!(error instanceof ApiError) || error.status !== 403) {
      session.clear();
      fill(problem, el("div", { class: "error" }, error.message));
      return;
    }
  } finally {
    signingIn = false;
  }
  input.value = "";
  announce("Signed in.");
  if (!location.hash.startsWith("#/")) location.hash = "#/jobs";
  else route();
  main.focus();
}

function signOut(message) {
  session.clear();
  showSignIn(message);
  announce("Signed out.");
}

signOutButton.addEventListener("click", () => signOut());
window.addEventListener("pressroom:unauthorized", (event) => {
  if (session.key && !signingIn) signOut(`Signed out: ${event.detail.message}`);
});
window.addEventListener("hashchange", () => {
  if (location.hash.startsWith("#/")) route();
});
route();
