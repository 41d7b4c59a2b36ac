// The tenant's usage of a month (this one unless another is chosen).

import { api, query } from "./api.js";
import { el, errorBox, facts, field, fill, number } from "./dom.js";

function thisMonth() {
  return new Date().toISOString().slice(0, 7);
}

// A tenant with a monthly quota: the quota, what unfinished work holds of it now, and
// what is left (the last two for this month only).
function quotaFacts(usage) {
  if (usage.monthly_quota === null) return [];
  const rows = [["Monthly quota", number(usage.monthly_quota)]];
  if (usage.quota_left !== null) {
    rows.push(["Held by unfinished work", number(usage.held)], ["Left this month", number(usage.quota_left)]);
  }
  return rows;
}

export async function showUsage(main, params, signal) {
  const month = params.month || thisMonth();
  const input = el("input", { type: "month", id: "usage-month", value: month, required: true });
  const form = el("form", { class: "inline" }, field("Month", input), el("button", { type: "submit" }, "Show"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    location.hash = `#/usage${query({ month: input.value })}`;
  });
  const region = el("div", { id: "usage" }, el("p", {}, "Loading…"));
  main.append(el("h1", {}, "Usage"), form, region);
  try {
    const usage = await api("GET", `/usage${query({ month })}`, undefined, signal);
    fill(region, el("h2", {}, `Usage of ${month} (UTC)`), facts([
      ["Succeeded", number(usage.succeeded)], ["Failed", number(usage.failed)],
      ["Cancelled", number(usage.cancelled)], ["Pages", number(usage.pages)],
      ["Bytes", number(usage.bytes)], ["Render seconds", number(usage.render_seconds, 1)],
      ["Free tier", number(usage.free_tier)], ["Billable", number(usage.billable)],
      ...quotaFacts(usage),
    ]));
  } catch (error) {
    if (!signal.aborted) fill(region, errorBox(error));
  }
}
