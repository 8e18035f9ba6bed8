import { el, post, when } from "./common.js";

const $ = (id) => document.getElementById(id);
let detail = null;

function short(version) {
  return version ? version.slice(0, 12) : "–";
}

function scores(map) {
  const entries = Object.entries(map ?? {});
  return entries.length ? entries.map(([name, value]) => `${name} ${Number(value).toFixed(3)}`).join(", ") : "–";
}

async function getJson(path) {
  const response = await fetch(path);
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(data.error || `${response.status} ${response.statusText}`);
  return data;
}

async function load() {
  $("prompts-error").textContent = "";
  let data;
  try {
    data = await getJson("/api/prompts");
  } catch (error) {
    $("prompts-error").textContent = error.message;
    return;
  }
  $("prompts-path").textContent = data.path;
  const rows = data.versions.map((v) =>
    el("tr", { "data-version": v.version, class: v.active ? "active-version" : null, onclick: () => show(v.version) },
      el("td", {}, el("code", { title: v.version }, short(v.version)), v.active ? " " : "", v.active ? el("span", { class: "badge status-succeeded" }, "active") : null),
      el("td", {}, v.source),
      el("td", {}, el("code", { title: v.parent ?? "" }, short(v.parent))),
      el("td", { class: "scores" }, scores(v.scores)),
      el("td", {}, v.changed.join(", ") || "–"),
      el("td", { class: "when" }, when(v.created_at)),
      el("td", {}, v.active ? null : el("button", { class: "use", onclick: (event) => { event.stopPropagation(); use(v.version); } }, "Use")),
    ));
  document.querySelector("#prompt-versions tbody").replaceChildren(...rows);
  const wanted = detail ?? new URLSearchParams(location.search).get("version") ?? data.current;
  if (wanted) show(wanted);
}

async function use(version) {
  try {
    await post("/api/prompts/use", { version });
    await load();
  } catch (error) {
    $("prompts-error").textContent = error.message;
  }
}

async function show(version) {
  let data;
  try {
    data = await getJson(`/api/prompts/${encodeURIComponent(version)}`);
  } catch (error) {
    $("prompts-error").textContent = error.message;
    return;
  }
  detail = data.version;
  const url = new URL(location.href);
  url.searchParams.set("version", data.version);
  history.replaceState(null, "", url);
  $("prompt-detail").hidden = false;
  $("detail-version").textContent = data.version;
  $("detail-active").replaceChildren(data.active ? el("span", { class: "badge status-succeeded" }, "active") : "");
  $("detail-note").textContent = [data.source, data.parent ? `parent ${short(data.parent)}` : "no parent", data.note, `scores: ${scores(data.scores)}`].filter(Boolean).join(" · ");
  const select = $("detail-component");
  const chosen = select.value;
  const names = Object.keys(data.texts).sort();
  select.replaceChildren(...names.map((name) => el("option", { value: name }, data.changed_from_parent.includes(name) ? `${name} (changed)` : name)));
  select.value = names.includes(chosen) ? chosen : (data.changed_from_parent[0] ?? names[0]);
  const render = () => {
    $("detail-text").textContent = data.texts[select.value] ?? "";
    $("detail-changed").textContent = data.changed_from_parent.length
      ? `changed from the ${data.parent ? "parent" : "built-in prompts"}: ${data.changed_from_parent.join(", ")}`
      : "same texts as the built-in prompts";
  };
  select.onchange = render;
  render();
}

load();
