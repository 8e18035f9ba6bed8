import { el, post, when } from "./common.js";

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
$("memory-query").value = params.get("q") || "";
$("memory-kind").value = params.get("kind") || "";
let scope = params.get("scope") || "default";

async function load() {
  $("memory-error").textContent = "";
  const query = new URLSearchParams({ scope, kind: $("memory-kind").value, q: $("memory-query").value.trim() });
  const response = await fetch(`/api/memory?${query}`);
  const data = await response.json().catch(() => ({}));
  if (!response.ok) {
    $("memory-error").textContent = data.error || `${response.status} ${response.statusText}`;
    $("memory-items").replaceChildren();
    return;
  }
  $("memory-scope").replaceChildren(...data.scopes.map((name) => el("option", { value: name, selected: name === data.scope }, name)));
  $("memory-count").textContent = data.query ? `${data.items.length} nearest "${data.query}"` : `${data.items.length} newest`;
  $("memory-items").replaceChildren(...(data.items.length ? data.items.map(item) : [el("p", { class: "hint" }, "(no memories)")]));
  const url = new URL(location.href);
  for (const [name, value] of query) {
    if (value && !(name === "scope" && value === "default")) url.searchParams.set(name, value);
    else url.searchParams.delete(name);
  }
  history.replaceState(null, "", url);
}

function item(entry) {
  const value = entry.value;
  const fields = entry.kind === "lessons"
    ? [["lesson", value.lesson], ["goal", value.goal], ["task", value.task_id]]
    : [["goal", value.goal], ["task", `${value.task_id ?? ""}: ${value.title ?? ""}`], ["persona", value.persona],
       ["tools", Object.entries(value.tools_used ?? {}).map(([name, n]) => `${name} x${n}`).join(", ")],
       ["summary", value.summary], ["issues", (value.issues ?? []).join("; ")], ["lesson", value.lesson],
       ["plan", (value.plan ?? []).join(" | ")]];
  const forget = el("button", { class: "reject", onclick: async () => {
    if (!confirm(`Forget ${entry.key}?`)) return;
    try {
      await post("/api/memory/forget", { scope, key: entry.key });
      await load();
    } catch (error) {
      $("memory-error").textContent = error.message;
    }
  } }, "Forget");
  return el("details", { class: "memory-item", "data-key": entry.key, "data-kind": entry.kind },
    el("summary", {},
      el("span", { class: `badge status-${value.outcome ?? "lesson"}` }, entry.kind === "lessons" ? "lesson" : "episode"),
      " ", el("code", {}, entry.key), " ", el("span", { class: "memory-line" }, entry.line),
      entry.score !== undefined ? el("span", { class: "hint" }, ` · score ${entry.score.toFixed(3)}`) : null),
    el("dl", { class: "memory-fields" },
      ...fields.filter(([, text]) => text).flatMap(([name, text]) => [el("dt", {}, name), el("dd", {}, text)]),
      el("dt", {}, "thread"), el("dd", {}, value.thread_id ? el("a", { href: `/threads/${encodeURIComponent(value.thread_id)}` }, value.thread_id) : ""),
      el("dt", {}, "stored"), el("dd", {}, when(entry.updated_at))),
    el("div", { class: "row" }, forget),
  );
}

$("memory-scope").addEventListener("change", () => { scope = $("memory-scope").value; load(); });
$("memory-kind").addEventListener("change", load);
$("memory-form").addEventListener("submit", (event) => { event.preventDefault(); load(); });
load();
