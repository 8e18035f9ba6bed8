import { badge, cost, el, follow, post, tokens, when } from "./common.js";

const filter = document.getElementById("status-filter");
const body = document.querySelector("#threads tbody");
const count = document.getElementById("count");
const startError = document.getElementById("start-error");
let rows = [];

filter.value = new URLSearchParams(location.search).get("status") || "";

function open(threadId) {
  location.href = `/threads/${encodeURIComponent(threadId)}`;
}

function render() {
  const wanted = filter.value;
  const shown = wanted ? rows.filter((row) => row.status === wanted) : rows;
  const fragment = document.createDocumentFragment();
  for (const row of shown) {
    const status = row.status;
    fragment.append(
      el("tr", { "data-thread": row.thread_id, onclick: () => open(row.thread_id) },
        el("td", {}, el("a", { href: `/threads/${encodeURIComponent(row.thread_id)}` }, row.thread_id)),
        el("td", {}, badge(status)),
        el("td", { class: "goal" }, row.goal),
        el("td", { class: "when" }, when(row.updated)),
        el("td", { class: "num" }, row.usage.llm_calls),
        el("td", { class: "num" }, tokens(row.usage)),
        el("td", { class: "num" }, cost(row.usage)),
      ),
    );
  }
  body.replaceChildren(fragment);
  count.textContent = `${shown.length} of ${rows.length}`;
}

// Alerts of the dashboard's rules (aimegraph dashboard --alerts) and of the workers'
// (stale: a firing alert whose worker stopped checking): firing ones first.
const ALERT_BADGES = { firing: "failed", stale: "paused", resolved: "succeeded" };
const at = (seconds) => when(new Date(seconds * 1000).toISOString());

// A firing alert since it fired; a resolved one when it resolved, and when it fired.
function alertTime(alert) {
  if (alert.state !== "resolved" || !alert.resolved_at) return ` since ${at(alert.fired_at)}`;
  return ` resolved ${at(alert.resolved_at)} (fired ${at(alert.fired_at)})`;
}

function renderAlerts(alerts) {
  const list = document.getElementById("alerts");
  list.replaceChildren(
    ...(alerts || []).map((alert) =>
      el("li", { class: `alert ${alert.state}` },
        el("span", { class: `badge status-${ALERT_BADGES[alert.state] || "succeeded"}` }, alert.state),
        ` ${alert.rule}${alert.origin ? ` (${alert.origin})` : ""}: ${alert.message}`,
        el("span", { class: "when" }, alertTime(alert)),
        alert.delivery ? el("span", { class: "error" }, ` (webhook: ${alert.delivery})`) : "",
      ),
    ),
  );
  document.getElementById("alerts-card").hidden = !(alerts || []).length;
}

filter.addEventListener("change", () => {
  const url = new URL(location.href);
  if (filter.value) url.searchParams.set("status", filter.value);
  else url.searchParams.delete("status");
  history.replaceState(null, "", url);
  render();
});

async function start(path, payload) {
  startError.textContent = "";
  try {
    const { thread_id: threadId } = await post(path, payload);
    open(threadId);
  } catch (error) {
    startError.textContent = error.message;
  }
}

document.getElementById("demo-form").addEventListener("submit", (event) => {
  event.preventDefault();
  start("/api/demo", { approve_plan: document.getElementById("demo-approve").checked });
});

document.getElementById("run-form").addEventListener("submit", (event) => {
  event.preventDefault();
  let config = {};
  const text = document.getElementById("run-config").value.trim();
  if (text) {
    try {
      config = JSON.parse(text);
    } catch (error) {
      startError.textContent = `config is not JSON: ${error.message}`;
      return;
    }
  }
  start("/api/runs", {
    goal: document.getElementById("run-goal").value,
    model: document.getElementById("run-model").value,
    thread_id: document.getElementById("run-thread").value,
    response_format: document.getElementById("run-response-format").value,
    config,
  });
});

// The page came with the rows (the server read them): show them at once, then go live.
const initial = JSON.parse(document.getElementById("initial-state")?.textContent || "null");
if (initial) {
  rows = initial.threads;
  render();
  renderAlerts(initial.alerts);
}
follow("/api/events", "threads", (data) => {
  rows = data.threads;
  render();
  renderAlerts(data.alerts);
});
