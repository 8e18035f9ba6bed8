import { el, when } from "./common.js";

const $ = (id) => document.getElementById(id);

function systems(list) {
  return list.map((s) => {
    const rate = s.pass_at_1 === null || s.pass_at_1 === undefined ? "–" : Number(s.pass_at_1).toFixed(2);
    const spent = s.tokens_per_solved ? Math.round(s.tokens_per_solved).toLocaleString() : "–";
    return `${s.name} ${rate} (${spent})`;
  }).join("; ");
}

async function load() {
  const response = await fetch("/api/evals");
  const data = await response.json().catch(() => ({}));
  if (!response.ok) {
    $("evals-error").textContent = data.error || `${response.status} ${response.statusText}`;
    return;
  }
  $("evals-folder").textContent = data.folder;
  const rows = data.evals.map((e) => {
    const report = `/evals/${encodeURIComponent(e.name)}`;
    return el("tr", { "data-eval": e.name, onclick: () => { if (e.has_report) location.href = report; } },
      el("td", {}, e.has_report ? el("a", { href: report }, e.name) : e.name),
      el("td", {}, e.suite ?? ""),
      el("td", {}, String(e.k ?? "")),
      el("td", {}, `${e.rollouts ?? 0} / ${e.expected ?? "?"}`, e.complete ? null : el("span", { class: "badge status-running" }, " incomplete")),
      el("td", {}, systems(e.systems)),
      el("td", { class: "when" }, when(e.updated_at)),
    );
  });
  document.querySelector("#evals tbody").replaceChildren(
    ...(rows.length ? rows : [el("tr", {}, el("td", { colspan: 6, class: "hint" }, "(no evals yet: aimegraph eval SUITE)"))]));
}

load();
