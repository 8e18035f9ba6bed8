// Shared helpers. Every string from the server enters the page through
// text nodes (never innerHTML), so a task summary holding HTML shows as text.

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export async function post(path, body) {
  const response = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(data.error || `${response.status} ${response.statusText}`);
  return data;
}

export function when(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? String(iso) : date.toLocaleString();
}

export function tokens(usage) {
  return (usage?.input_tokens ?? 0) + (usage?.output_tokens ?? 0);
}

export function cost(usage) {
  const value = usage?.cost_usd ?? 0;
  return value ? `$${value.toFixed(4)}` : "–";
}

export function badge(status) {
  return el("span", { class: `badge status-${status}` }, status);
}

// An EventSource that shows its state in the header's "live" marker. A hidden
// tab lets go of its stream (browsers allow six HTTP/1.1 connections per host,
// and each open stream holds one) and catches up with a fresh one when shown:
// the first event of a stream is always the whole current state.
export function follow(path, event, onData) {
  const live = document.getElementById("live");
  let source = null;
  const open = () => {
    source = new EventSource(path);
    source.addEventListener(event, (message) => {
      live.textContent = "live";
      live.className = "live on";
      onData(JSON.parse(message.data));
    });
    source.addEventListener("error", () => {
      live.textContent = "reconnecting…";
      live.className = "live off";
    });
  };
  document.addEventListener("visibilitychange", () => {
    if (document.hidden && source) {
      source.close();
      source = null;
      live.textContent = "paused while hidden";
      live.className = "live";
    } else if (!document.hidden && !source) {
      open();
    }
  });
  if (!document.hidden) open();
}
