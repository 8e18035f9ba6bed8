"""The dashboard's HTTP reference, generated from its route table: each route's
methods and path, described by its endpoint's docstring (what it does, its query or
body, its answers and error codes).

``python -m aimegraph.dashboard.reference > docs/dashboard-api.md`` writes the page;
``tests/dashboard/test_reference.py`` fails when a route has no such description or
the committed page differs from the routes.
"""

from __future__ import annotations

import inspect
import re
import sys
from dataclasses import dataclass

from langgraph.checkpoint.memory import InMemorySaver
from starlette.applications import Starlette
from starlette.routing import Route

from aimegraph.dashboard.app import create_app

__all__ = ["RouteDoc", "UndocumentedRouteError", "main", "reference", "route_docs", "undocumented"]

LABELS = ("Query:", "Body:", "Answers:")
"""How a docstring's paragraphs on the request and its answers open."""
REQUIRED = "Answers:"
BODY = "Body:"
"""Every route says what it answers; every route that takes a body, what it takes."""

INTRO = """\
# Dashboard HTTP API

The routes of `aimegraph dashboard` (`aimegraph.dashboard.create_app`), in the order the
app matches them. This page is generated from the app's route table and each route's
docstring: `python -m aimegraph.dashboard.reference > docs/dashboard-api.md` (the test
`tests/dashboard/test_reference.py` fails when a route has no description or this page
is out of date).

What holds for every route:

- **Host and token.** Without a token (`--token`, `AIMEGRAPH_DASHBOARD_TOKEN`) the app
  answers only requests addressed to a loopback host name (any other: 400). With one, every
  request carries it, as `Authorization: Bearer TOKEN` or in the cookie a page opened with
  `?token=TOKEN` sets (that request is redirected, 303, to the same address without the
  token): 401 `{"error": ...}` when it is missing or wrong.
- **Changes** are `POST`s of a JSON object (`Content-Type: application/json`, else 415)
  from the page's own origin (a foreign `Origin` header: 403). A body that is not a JSON
  object reads as `{}`.
- **Errors** are JSON, `{"error": "one line saying what is wrong"}`. Each `GET` route
  also answers `HEAD`.
- **Event streams** are server-sent events (`text/event-stream`, a ping every 15 s);
  each event's data is the JSON the matching `GET` route answers.
- `/static/...` serves the pages' scripts and styles.
"""


class UndocumentedRouteError(ValueError):
    """A route whose endpoint has no description the reference can show."""


@dataclass(frozen=True)
class RouteDoc:
    methods: tuple[str, ...]
    path: str
    doc: str

    @property
    def summary(self) -> str:
        """The description's first sentence."""
        first = self.doc.split("\n\n")[0].replace("\n", " ")
        return re.split(r"(?<=\.)\s", first, maxsplit=1)[0].rstrip(".")


def route_docs(app: Starlette) -> list[RouteDoc]:
    """Each route of ``app`` (mounts such as ``/static`` left out) with its docstring."""
    return [
        RouteDoc(
            methods=tuple(m for m in ("GET", "POST", "PUT", "DELETE") if m in route.methods),
            path=route.path_format,
            doc=inspect.getdoc(route.endpoint) or "",
        )
        for route in app.routes
        if isinstance(route, Route) and route.methods
    ]


def undocumented(app: Starlette) -> list[str]:
    """The routes whose docstring is missing, says nothing of their answers, or (a
    route that takes a body) nothing of the body; as ``METHOD /path: what is missing``."""
    missing = []
    for route in route_docs(app):
        where = f"{'|'.join(route.methods)} {route.path}"
        if not route.doc:
            missing.append(f"{where}: no docstring")
            continue
        if REQUIRED not in route.doc:
            missing.append(f"{where}: no {REQUIRED!r} paragraph")
        if "POST" in route.methods and BODY not in route.doc:
            missing.append(f"{where}: no {BODY!r} paragraph")
    return missing


def reference(app: Starlette | None = None) -> str:
    """The reference page (Markdown) of ``app``'s routes (by default the dashboard's).
    UndocumentedRouteError names the routes it cannot describe."""
    app = app or create_app(InMemorySaver())
    if missing := undocumented(app):
        raise UndocumentedRouteError("routes without a description: " + "; ".join(missing))
    routes = route_docs(app)
    lines = [INTRO, "| method | path | what |", "|---|---|---|"]
    lines += [
        f"| {' '.join(r.methods)} | [`{r.path}`](#{_anchor(r)}) | {_cell(r.summary)} |"
        for r in routes
    ]
    for route in routes:
        lines += ["", f"## {' '.join(route.methods)} `{route.path}`", "", _body(route.doc)]
    return "\n".join(lines) + "\n"


def _body(doc: str) -> str:
    paragraphs = []
    for paragraph in _markdown(doc).split("\n\n"):
        for label in LABELS:
            if paragraph.startswith(label):
                paragraph = f"**{label}**{paragraph.removeprefix(label)}"
        paragraphs.append(paragraph)
    return "\n\n".join(paragraphs)


def _markdown(text: str) -> str:
    """Docstring markup as Markdown: ````code```` becomes `` `code` ``."""
    return text.replace("``", "`")


def _cell(text: str) -> str:
    """Text for a table cell: a ``|`` in it would end the cell."""
    return _markdown(text).replace("|", "\\|")


def _anchor(route: RouteDoc) -> str:
    """The anchor GitHub and mkdocs give the route's heading."""
    heading = f"{' '.join(route.methods)} {route.path}".lower()
    return re.sub(r"[^a-z0-9 _-]", "", heading).replace(" ", "-")


def main() -> int:
    """Print the reference; one line on stderr and exit 1 when a route is undocumented."""
    try:
        sys.stdout.write(reference())
    except UndocumentedRouteError as exc:
        print(f"aimegraph.dashboard.reference: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
