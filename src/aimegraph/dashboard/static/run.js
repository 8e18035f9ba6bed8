import { badge, cost, el, follow, post, when } from "./common.js";

const threadId = decodeURIComponent(location.pathname.replace(/^\/threads\//, ""));
const api = `/api/threads/${encodeURIComponent(threadId)}`;
const $ = (id) => document.getElementById(id);
let shownInterrupts = null;
let shownPlan = null;

document.title = `aimegraph · ${threadId}`;
$("thread-id").textContent = threadId;

function render(view) {
  const status = view.status;
  $("status").replaceWith(Object.assign(badge(status), { id: "status" }));
  $("holder").textContent = view.holder ? `run by ${view.holder}` : "";
  $("resume-run").hidden = status !== "stopped";
  $("cancel-run").hidden = !["running", "stopped", "paused", "queued"].includes(status);
  // Actors read notes at their next step: a run that has not ended (pages.LIVE_STATUSES).
  $("note-card").hidden = !["running", "paused", "stopped", "queued"].includes(status);
  $("goal").textContent = view.goal;
  $("reason").textContent = view.reason && view.reason !== status ? view.reason : "";
  $("error").textContent = view.error ? `the run stopped with an error: ${view.error}` : "";
  $("updated").textContent = when(view.updated);
  $("version").textContent = view.version;
  $("model").textContent = view.settings?.model ?? "(not recorded)";
  const prompts = $("prompt-version");
  prompts.firstElementChild.textContent = view.prompt_version ? view.prompt_version.slice(0, 12) : "built-in";
  prompts.href = view.prompt_version ? `/prompts?version=${encodeURIComponent(view.prompt_version)}` : "/prompts";
  document.body.dataset.version = view.version;
  document.body.dataset.status = status;
  renderInterrupts(view.interrupts);
  $("checklist").textContent = view.checklist || "(no plan yet)";
  renderPlan(view);
  renderTasks(view);
  $("plans").replaceChildren(
    ...view.plans.map((plan) =>
      el("li", {},
        el("div", { class: "plan-reason" }, plan.reason ? `replan: ${plan.reason}` : "first plan"),
        el("div", {}, plan.rationale || "(no rationale given)"),
        el("div", { class: "hint" }, when(plan.at)),
      )),
  );
  renderVerdict(view.verdict);
  const facts = Object.entries(view.facts ?? {}).sort(([a], [b]) => a.localeCompare(b));
  $("facts").replaceChildren(...(facts.length
    ? facts.flatMap(([key, value]) => [el("dt", {}, key), el("dd", {}, value)])
    : [el("dd", { class: "hint" }, "(none: actors keep facts with the remember tool)")]));
  $("final-answer").textContent = view.final_answer || "(none yet)";
  $("typed-answer").textContent = view.structured_response != null
    ? `(typed: structured_response, ${view.settings?.response_format ?? "response_format"})` : "";
  renderUsage(view.usage);
  renderTimeline(view.timeline);
  $("updates").replaceChildren(
    ...view.updates.map((u) =>
      el("li", {}, el("span", { class: "hint" }, when(u.at)), " ", el("b", {}, u.task_id), ` ${u.status}: `, u.message)),
  );
}

$("feedback-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const rating = Number($("feedback-rating").value);
  try {
    await post(`${api}/feedback`, { rating, note: $("feedback-note").value.trim() });
    $("feedback-result").textContent = `rated ${rating}/5: kept with the run`;
  } catch (error) {
    $("feedback-result").textContent = error.message;
  }
});

$("note-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const text = $("note-text").value.trim();
  if (!text) return;
  try {
    await post(`${api}/notes`, { text });
    $("note-text").value = "";
    $("note-result").textContent = "sent: running actors read it at their next step";
  } catch (error) {
    $("note-result").textContent = error.message;
  }
});

function renderInterrupts(interrupts) {
  const key = interrupts.map((i) => `${i.id}:${i.error ?? ""}`).join(",");
  $("waiting").hidden = interrupts.length === 0;
  if (key === shownInterrupts) return; // keep what the user is typing
  shownInterrupts = key;
  $("answer-error").textContent = "";
  $("interrupts").replaceChildren(...interrupts.map(interruptForm));
}

async function control(action) {
  $("control-error").textContent = "";
  try {
    await post(`${api}/${action}`, {});
  } catch (error) {
    $("control-error").textContent = error.message;
  }
}

$("resume-run").addEventListener("click", () => control("resume"));
$("cancel-run").addEventListener("click", () => control("cancel"));

async function answer(interruptId, body) {
  $("answer-error").textContent = "";
  try {
    await post(`${api}/resume`, { interrupt_id: interruptId, ...body });
  } catch (error) {
    $("answer-error").textContent = error.message;
  }
}

function interruptForm(item) {
  const reason = el("input", { placeholder: "reason", class: "reason-input" });
  const decide = (approveLabel, rejectLabel) =>
    el("div", { class: "row" },
      el("button", { class: "approve", onclick: () => answer(item.id, { action: "approve" }) }, approveLabel),
      reason,
      el("button", { class: "reject", onclick: () => answer(item.id, { action: "reject", reason: reason.value || "rejected on the dashboard" }) }, rejectLabel),
    );
  if (item.kind === "approve_plan") {
    return el("div", { class: "interrupt", "data-kind": item.kind },
      el("h3", {}, "Approve the plan?"),
      el("pre", { class: "checklist" }, item.checklist || ""),
      item.error ? el("p", { class: "error" }, item.error) : null,
      decide("Approve plan", "Reject plan"),
      jsonEditor(item.plan, "plan-edit", 12, "Edit the plan (PlanUpdate JSON)", "Approve edited plan",
        (plan) => answer(item.id, { action: "edit", plan })),
    );
  }
  if (item.kind === "approve_tool") {
    const description = item.action_requests?.[0]?.description;
    return el("div", { class: "interrupt", "data-kind": item.kind },
      el("h3", {}, `Allow ${item.tool}?`, item.task_id ? ` (task ${item.task_id})` : ""),
      description ? el("p", { class: "hint" }, description) : null,
      el("pre", {}, JSON.stringify(item.args ?? {}, null, 2)),
      item.error ? el("p", { class: "error" }, item.error) : null,
      decide("Allow call", "Deny call"),
      jsonEditor(item.args, "args-edit", 6, "Edit the arguments (JSON)", "Run with these arguments",
        (args) => answer(item.id, { action: "edit", args })),
    );
  }
  if (item.kind === "escalation") return escalationForm(item);
  if (item.kind === "ask_human") {
    const text = el("input", { class: "answer-input", placeholder: "your answer" });
    return el("div", { class: "interrupt", "data-kind": item.kind },
      el("h3", {}, "An actor asks:"),
      el("p", { class: "question" }, item.question ?? ""),
      el("form", { class: "row", onsubmit: (event) => { event.preventDefault(); answer(item.id, { answer: text.value }); } },
        text, el("button", { type: "submit" }, "Answer")),
    );
  }
  return unitForm(item);
}

// Any other interrupt: an agent unit's own `interrupt()` (its value shown as is) or a
// kind this page does not know. Its answer is text, which the unit's interrupt gets back.
function unitForm(item) {
  const { id, ...fields } = item;
  const shown = "value" in fields && Object.keys(fields).length === 1 ? fields.value : fields;
  const text = el("input", { class: "answer-input", placeholder: "your answer" });
  return el("div", { class: "interrupt", "data-kind": item.kind ?? "unit" },
    el("h3", {}, item.unit ? `Agent unit ${item.unit} asks:` : "The run asks:"),
    el("pre", { class: "question" }, typeof shown === "string" ? shown : JSON.stringify(shown, null, 2)),
    el("form", { class: "row", onsubmit: (event) => { event.preventDefault(); answer(id, { answer: text.value }); } },
      text, el("button", { type: "submit" }, "Answer")),
  );
}

function escalationForm(item) {
  const note = el("input", { class: "note-input", placeholder: "note or reason" });
  const failed = item.failed_tasks ?? [];
  const taskChoice = el("select", { class: "task-choice" },
    ...failed.map((t) => el("option", { value: t.id }, t.id)));
  const taskAnswer = el("input", { class: "task-answer", placeholder: "the task's result, in your words" });
  const deadline = item.deadline
    ? el("p", { class: "hint" }, `Unanswered, it takes "${item.default}" at ${new Date(item.deadline * 1000).toLocaleTimeString()}.`)
    : null;
  return el("div", { class: "interrupt", "data-kind": item.kind },
    el("h3", {}, "The run needs a human"),
    el("p", {}, item.reason ?? ""),
    el("ul", {}, ...failed.map((t) => el("li", {}, el("b", {}, t.id), ` ${t.title}: ${t.reason}`))),
    el("pre", { class: "checklist" }, item.checklist || ""),
    item.error ? el("p", { class: "error" }, item.error) : null,
    deadline,
    failed.length
      ? el("form", { class: "row", onsubmit: (event) => { event.preventDefault(); answer(item.id, { answer: taskAnswer.value, task_id: taskChoice.value }); } },
        taskChoice, taskAnswer, el("button", { type: "submit", class: "answer-task" }, "Answer for the task"))
      : null,
    el("div", { class: "row" },
      note,
      el("button", { class: "replan", onclick: () => answer(item.id, { action: "replan", note: note.value }) }, "Replan"),
      el("button", { class: "reject", onclick: () => answer(item.id, { action: "give_up", reason: note.value || "given up on the dashboard" }) }, "Give up"),
    ),
    jsonEditor(item.plan, "plan-edit", 10, "Edit the plan (PlanUpdate JSON)", "Run the edited plan",
      (plan) => answer(item.id, { action: "edit", plan })),
  );
}

// A folded JSON editor prefilled with `value`; its button sends the parsed JSON.
function jsonEditor(value, cls, rows, summary, label, send) {
  const edited = el("textarea", { rows, spellcheck: "false", class: cls });
  edited.value = JSON.stringify(value ?? {}, null, 2);
  const editError = el("span", { class: "error" });
  const submit = () => {
    let parsed;
    try {
      parsed = JSON.parse(edited.value);
    } catch (error) {
      editError.textContent = `not JSON: ${error.message}`;
      return;
    }
    editError.textContent = "";
    send(parsed);
  };
  return el("details", {},
    el("summary", {}, summary),
    edited,
    el("div", { class: "row" }, el("button", { onclick: submit }, label), editError),
  );
}

function renderPlan(view) {
  const key = view.tasks.map((t) => `${t.id}:${t.status}:${t.dependencies.join("+")}:${t.title}`).join("|");
  if (key === shownPlan) return;
  shownPlan = key;
  if (view.tasks.length === 0) {
    $("plan").replaceChildren(el("p", { class: "hint" }, "no plan yet"));
    return;
  }
  const fallback = el("ul", { class: "plan-list" },
    ...view.tasks.map((t) => el("li", {}, badge(t.status), ` ${t.id}: ${t.title}`,
      t.dependencies.length ? el("span", { class: "hint" }, ` after ${t.dependencies.join(", ")}`) : "")),
  );
  const image = el("img", {
    src: `${api}/plan.svg?v=${encodeURIComponent(view.version)}`,
    alt: "the plan's task graph, coloured by status",
    class: "plan-drawing",
  });
  image.addEventListener("error", () => {
    $("plan").replaceChildren(
      el("p", { class: "hint" }, "No drawing (install aimegraph[draw] and Graphviz for one):"),
      fallback,
    );
  });
  $("plan").replaceChildren(image);
}

// Task blocks are rebuilt only when their task or actors changed: a live run
// changes one or two tasks per step, and transcripts are the bulk of the page.
const taskBlocks = new Map();

function renderTasks(view) {
  const open = new Set([...document.querySelectorAll("#tasks details[open]")].map((d) => d.dataset.key));
  const blocks = view.tasks.map((task) => {
    const attempts = view.actors[task.id] ?? [];
    const key = JSON.stringify([task, attempts]);
    const cached = taskBlocks.get(task.id);
    if (cached && cached.key === key) return cached.node;
    const node = taskBlock(task, attempts, open, !cached);
    taskBlocks.set(task.id, { key, node });
    return node;
  });
  const container = $("tasks");
  if (blocks.length !== container.children.length || blocks.some((b, i) => container.children[i] !== b)) {
    container.replaceChildren(...blocks);
  }
}

function taskBlock(task, attempts, open, isNew) {
  const key = `task:${task.id}`;
  return el("details", { "data-key": key, "data-task": task.id, class: "task", open: open.has(key) || (isNew && task.status === "in_progress") },
    el("summary", {}, badge(task.status), " ", el("b", {}, task.id), `: ${task.title}`,
      task.result ? el("span", { class: "summary" }, ` — ${clip(task.result.summary, 140)}`) : ""),
    el("div", { class: "task-body" },
      task.description ? el("p", {}, task.description) : null,
      task.completion_criteria ? el("p", { class: "hint" }, `done when: ${task.completion_criteria}`) : null,
      task.dependencies.length ? el("p", { class: "hint" }, `after: ${task.dependencies.join(", ")}`) : null,
      task.result ? resultBlock(task.result) : null,
      ...attempts.map((actor) => actorBlock(task.id, actor, open)),
    ),
  );
}

function clip(text, limit) {
  const flat = String(text).replace(/\s+/g, " ").trim();
  return flat.length <= limit ? flat : `${flat.slice(0, limit - 1)}…`;
}

function resultBlock(result) {
  const artifacts = Object.entries(result.artifacts ?? {});
  return el("div", { class: `result ${result.status}` },
    el("div", {}, el("b", {}, `result (${result.status}): `), el("span", { class: "result-summary" }, result.summary)),
    artifacts.length ? el("ul", {}, ...artifacts.map(([name, value]) => el("li", {}, el("code", {}, name), ": ", value))) : null,
  );
}

function actorBlock(taskId, actor, open) {
  const key = `actor:${taskId}:${actor.attempt}`;
  return el("details", { "data-key": key, class: "actor", open: open.has(key) },
    el("summary", {}, `actor, attempt ${actor.attempt} · ${actor.steps} steps · tools: ${actor.tools.join(", ") || "none"}`),
    el("p", {}, el("b", {}, "persona: "), actor.persona || "(default)"),
    el("p", {}, el("b", {}, "bundles: "), actor.bundles.join(", ") || "(chosen by the factory)"),
    actor.error ? el("p", { class: "error" }, actor.error) : null,
    el("details", { "data-key": `${key}:prompt`, open: open.has(`${key}:prompt`) },
      el("summary", {}, "actor spec (system prompt: persona, tools, knowledge, environment)"),
      el("pre", { class: "prompt" }, actor.system_prompt)),
    el("ol", { class: "transcript" }, ...actor.transcript.map(entryItem)),
  );
}

function entryItem(entry) {
  const label = { prompt: "task", reply: "reply", call: "call", progress: "progress", result: "result", observation: "observation" }[entry.kind] ?? entry.kind;
  let text;
  if (entry.kind === "call" || entry.kind === "progress" || entry.kind === "result") {
    text = `${entry.tool}(${JSON.stringify(entry.args)})`;
  } else if (entry.kind === "observation") {
    text = `${entry.tool ?? ""}${entry.status === "error" ? " (error)" : ""}: ${entry.text}`;
  } else {
    text = entry.text;
  }
  return el("li", { class: `entry ${entry.kind}` }, el("span", { class: "kind" }, label), el("pre", {}, text));
}

function renderVerdict(verdict) {
  if (!verdict) {
    $("verdict").replaceChildren(el("p", { class: "hint" }, "(not judged yet)"));
    return;
  }
  $("verdict").replaceChildren(
    el("p", {}, badge(verdict.passed ? "passed" : "rejected"), " ", verdict.reasoning),
    el("ul", {}, ...verdict.issues.map((issue) => el("li", {}, issue))),
  );
}

// The run's usage by role, then by task (and outside tasks: planner, reporter, final
// verifier) and by team member (each a share of the same totals), with the cached-input and reasoning tokens inside "in" and "out". A
// share an agent unit did not report is "unknown" (or "+ unknown" beside what was
// counted), and so is the total then: it is a lower bound.
function renderUsage(usage) {
  const columns = ["LLM calls", "tokens in", "cached in", "tokens out", "reasoning", "tool calls", "cost"];
  const row = (name, u, unknown = false) => {
    const counts = [u.llm_calls, u.input_tokens, u.cached_input_tokens ?? 0, u.output_tokens,
      u.reasoning_tokens ?? 0, u.tool_calls ?? 0];
    if (unknown && !u.llm_calls && !u.input_tokens) {
      return el("tr", { class: "usage-unknown" }, el("td", {}, name),
        el("td", { colspan: columns.length, class: "num" }, "unknown (its agent reports no usage)"));
    }
    return el("tr", unknown ? { class: "usage-unknown" } : {},
      el("td", {}, name, unknown ? " (+ unknown)" : ""),
      ...counts.map((n) => el("td", { class: "num" }, n)),
      el("td", { class: "num" }, cost(u)));
  };
  const group = (title, shares, unknown = []) => Object.keys(shares ?? {}).length
    ? [el("tr", {}, el("th", { colspan: columns.length + 1 }, title)),
      ...Object.entries(shares).map(([name, u]) => row(name, u, unknown.includes(name)))]
    : [];
  $("usage").replaceChildren(
    el("thead", {}, el("tr", {}, el("th", {}, ""), ...columns.map((c) => el("th", { class: "num" }, c)))),
    el("tbody", {}, ...group("by role", usage.by_role),
      ...group("by task", usage.by_task, usage.unknown_tasks ?? []),
      ...(Object.keys(usage.by_task ?? {}).length && usage.outside_tasks
        ? [row("outside tasks", usage.outside_tasks)] : []),
      ...group("by team member", usage.by_member, usage.unknown_members ?? [])),
    el("tfoot", {}, row("total", usage, (usage.unknown_tasks ?? []).length > 0)),
  );
}

const seconds = (s) => (s < 10 ? `${s.toFixed(2)} s` : `${s.toFixed(1)} s`);

// A Gantt strip per task and per planner, reporter and verifier call, in seconds
// since the run started: a task's ready time is the faint lead-in before its bar, its
// tool calls the marks inside it, its failed attempts the dashed bars before it; the
// critical path's tasks are outlined.
function renderTimeline(timeline) {
  const bars = timeline?.bars ?? [];
  const critical = new Set(timeline?.critical_path ?? []);
  const facts = [];
  if (bars.length) facts.push(`${seconds(timeline.elapsed_s)} in all`);
  if (timeline?.time_to_first_task_s != null) facts.push(`first task after ${seconds(timeline.time_to_first_task_s)}`);
  if (critical.size) facts.push(`critical path ${seconds(timeline.critical_path_s)}: ${timeline.critical_path.join(" → ")}`);
  $("timeline-summary").textContent = facts.length ? `(${facts.join(" · ")})` : "";
  if (!bars.length) {
    $("timeline").replaceChildren(el("p", { class: "hint" }, "(nothing has run yet)"));
    return;
  }
  const span = Math.max(timeline.elapsed_s, 1e-6);
  const pct = (s) => `${Math.min(100, Math.max(0, (100 * s) / span)).toFixed(3)}%`;
  // Placed through the CSSOM: the page's CSP refuses style attributes.
  const placed = (node, start, length) => {
    node.style.left = pct(start);
    node.style.width = pct(length);
    return node;
  };
  const rows = bars.map((bar) => {
    const end = bar.end ?? timeline.elapsed_s;
    const isTask = bar.kind === "task";
    const label = isTask ? bar.name : bar.kind;
    const what = isTask ? `${bar.name}: ${bar.title} (${bar.status})` : `${bar.kind} call`;
    const ready = isTask && bar.ready != null && bar.ready < bar.start
      ? placed(el("div", { class: "gantt-wait",
        title: `${bar.name} ready at ${seconds(bar.ready)}, waited ${seconds(bar.start - bar.ready)}` }), bar.ready, bar.start - bar.ready)
      : null;
    const strip = placed(el("div", {
      class: `gantt-bar ${isTask ? `task status-${bar.status}` : `role-${bar.kind}`}${critical.has(bar.name) && isTask ? " critical" : ""}`,
      title: `${what}: ${seconds(bar.start)} to ${bar.end == null ? "now (running)" : seconds(bar.end)}`,
    }), bar.start, Math.max(end - bar.start, span / 500));
    const earlier = (bar.earlier ?? []).map(([start, stop]) =>
      placed(el("div", { class: "gantt-bar earlier", title: `${bar.name}: a failed attempt, ${seconds(start)} to ${seconds(stop)}` }),
        start, Math.max(stop - start, span / 500)));
    const tools = (bar.tools ?? []).map(([tool, start, stop]) =>
      placed(el("div", { class: "gantt-tool", title: `${tool}: ${seconds(stop - start)}` }), start, Math.max(stop - start, span / 1000)));
    return el("div", { class: "gantt-row", "data-kind": bar.kind, "data-name": bar.name },
      el("span", { class: "gantt-label", title: what }, label),
      el("div", { class: "gantt-track" }, ...earlier, ready, strip, ...tools),
      el("span", { class: "gantt-time hint" }, bar.end == null ? "running" : seconds(bar.end - bar.start)));
  });
  $("timeline").replaceChildren(...rows);
}

// The page came with the run's state (the server read it): show it whole at once,
// then go live.
const initial = JSON.parse($("initial-state")?.textContent || "null");
if (initial) render(initial);
follow(`${api}/events`, "run", render);
