// The JSON API as the console calls it: the key from sessionStorage as a Bearer token,
// errors as `ApiError` carrying the API's `error.type` and message, and live updates from
// the Server-Sent Events routes, read with fetch() (EventSource cannot send a header).

const KEY = "pressroom.console.key";
export const POLL_MS = 2000;

export const session = {
  get key() { return sessionStorage.getItem(KEY); },
  set(key) { sessionStorage.setItem(KEY, key); },
  clear() { sessionStorage.removeItem(KEY); },
};

export class ApiError extends Error {
  constructor(status, type, message, field) {
    super(message);
    this.status = status;
    this.type = type;
    this.field = field;
  }
}

function authHeaders(extra = {}) {
  return { Authorization: `Bearer ${session.key}`, ...extra };
}

function toError(status, json) {
  const error = (json && json.error) || {};
  const message = error.message || `the gateway answered HTTP ${status}`;
  const problem = new ApiError(status, error.type || "http", message, error.field);
  if (status === 401) window.dispatchEvent(new CustomEvent("pressroom:unauthorized", { detail: problem }));
  return problem;
}

async function decoded(response) {
  const text = await response.text();
  try {
    return text ? JSON.parse(text) : null;
  } catch {
    return null;
  }
}

/** One API call; the decoded JSON answer, or an `ApiError`. */
export async function api(method, path, body, signal) {
  const init = { method, headers: authHeaders(), signal, cache: "no-store" };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = "application/json";
  }
  const response = await fetch(path, init);
  const json = await decoded(response);
  if (!response.ok) throw toError(response.status, json);
  return json;
}

/** Whether an error is the gateway being away for now (no answer, a 5xx, a 429), which
 * a view rides out by trying again, rather than a refusal it must show and stop at. */
export function isOutage(error) {
  if (!(error instanceof ApiError)) return !(error instanceof SyntaxError);
  return error.status >= 500 || error.status === 429;
}

const FRESH_MS = 15000;
/** A signed link is asked for anew when it expires within this long. */

/** When a signed link stops working (ms since 1970): its `expires` (local storage) or
 * `X-Amz-Date` + `X-Amz-Expires` (S3); null when it does not say. */
export function expiresAt(href) {
  let url;
  try { url = new URL(href, location.href); } catch { return null; }
  const expires = url.searchParams.get("expires");
  if (expires) return Number(expires) * 1000;
  const date = url.searchParams.get("X-Amz-Date");
  const seconds = url.searchParams.get("X-Amz-Expires");
  const parts = date && date.match(/^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/);
  if (!parts || !seconds) return null;
  const [, y, mo, d, h, mi, s] = parts.map(Number);
  return Date.UTC(y, mo - 1, d, h, mi, s) + Number(seconds) * 1000;
}

/** Keep `link` (a signed download link) usable however long the page stays open: a click
 * on it once it has expired, or is about to, first asks `fresh()` for a new URL, then
 * follows that one. `onError` gets what went wrong if the new URL cannot be had. */
export function refreshBeforeUse(link, fresh, onError) {
  link.addEventListener("click", async (event) => {
    if (link.dataset.refreshed) { delete link.dataset.refreshed; return; } // the click below
    const expires = expiresAt(link.href);
    if (expires === null || expires - Date.now() > FRESH_MS) return;
    event.preventDefault();
    try {
      const url = await fresh();
      if (!url) throw new Error("the gateway gave no link: the file is gone");
      link.href = url;
      link.dataset.refreshed = "1";
      link.click();
    } catch (error) {
      onError(error);
    }
  });
}

/** `?a=1&b=2` of the parameters that have a value. */
export function query(params) {
  const kept = Object.entries(params).filter(([, v]) => v !== undefined && v !== null && v !== "");
  return kept.length ? `?${new URLSearchParams(kept)}` : "";
}

/** Parses text/event-stream as it arrives: `push(text)`, one `onMessage` per event. */
export class EventStreamParser {
  constructor(onMessage) {
    this.onMessage = onMessage;
    this.buffer = "";
    this.reset();
    this.lastId = null;
  }

  reset() {
    this.event = "message";
    this.data = [];
  }

  push(text) {
    this.buffer += text;
    // a trailing CR waits: the LF of its CRLF may come in the next chunk
    const cut = this.buffer.endsWith("\r") ? this.buffer.length - 1 : this.buffer.length;
    const lines = this.buffer.slice(0, cut).split(/\r\n|\r|\n/);
    this.buffer = lines.pop() + this.buffer.slice(cut);
    for (const line of lines) this.line(line);
  }

  line(line) {
    if (line === "") return this.dispatch();
    if (line.startsWith(":")) return undefined; // a comment: the keep-alive
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (name === "event") this.event = value;
    else if (name === "data") this.data.push(value);
    else if (name === "id") this.lastId = value;
    return undefined;
  }

  dispatch() {
    if (this.data.length) {
      let data = this.data.join("\n");
      try { data = JSON.parse(data); } catch { /* not JSON: passed on as text */ }
      this.onMessage({ event: this.event, data, id: this.lastId });
    }
    this.reset();
  }
}

/** Read an SSE route until it closes; `ApiError` if it answers with an error. */
export async function readStream(path, onMessage, signal, lastId) {
  const extra = { Accept: "text/event-stream" };
  if (lastId) extra["Last-Event-ID"] = lastId;
  const response = await fetch(path, { headers: authHeaders(extra), signal, cache: "no-store" });
  if (!response.ok) throw toError(response.status, await decoded(response));
  const parser = new EventStreamParser(onMessage);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return parser.lastId;
    parser.push(value);
  }
}

/** Resolves after `ms`, or at once when `signal` aborts. */
export function pause(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => { clearTimeout(timer); resolve(); }, { once: true });
  });
}

/** Keep a view current until `refresh()` says it has ended (returns true) or `signal`
 * aborts: refresh on each message of the SSE route `streamPath`, and every 2 s without
 * one (null), or when the route is not there (404, as before it existed), refuses (429)
 * or breaks. */
export async function follow(streamPath, refresh, signal) {
  let ended = await refresh();
  if (streamPath && !ended && !signal.aborted) {
    try {
      await readStream(streamPath, () => { refresh(); }, signal);
      ended = await refresh();
    } catch (error) {
      if (signal.aborted) return;
      console.info("live stream unavailable, polling instead:", error.message);
    }
  }
  while (!ended && !signal.aborted) {
    await pause(POLL_MS, signal);
    if (!signal.aborted) ended = await refresh();
  }
}

/** `fn` that never runs twice at once: a call while it runs makes it run once more after,
 * and gets that run's result (live messages can arrive faster than a refresh). */
export function coalesce(fn) {
  let running = null;
  let again = false;
  async function loop() {
    try {
      let result;
      do { again = false; result = await fn(); } while (again);
      return result;
    } finally {
      running = null;
    }
  }
  return () => {
    if (running) { again = true; return running; }
    running = loop();
    return running;
  };
}
