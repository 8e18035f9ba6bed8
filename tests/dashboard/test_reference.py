"""The dashboard's HTTP reference (docs/dashboard-api.md) is generated from its route
table: every route has a description saying what it answers (and what body it
takes), and the committed page is what the routes give now."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from aimegraph.dashboard import create_app
from aimegraph.dashboard.reference import (
    UndocumentedRouteError,
    reference,
    route_docs,
    undocumented,
)

PAGE = Path(__file__).resolve().parents[2] / "docs" / "dashboard-api.md"
REGENERATE = "python -m aimegraph.dashboard.reference > docs/dashboard-api.md"


def test_every_route_says_what_it_answers_and_what_body_it_takes(
    saver: BaseCheckpointSaver[Any],
) -> None:
    app = create_app(saver)
    assert undocumented(app) == []
    documented = {(r.methods, r.path) for r in route_docs(app)}
    assert (("POST",), "/api/threads/{thread_id}/resume") in documented
    assert (("GET",), "/threads/{thread_id}") in documented
    assert len([path for _, path in documented if path.startswith("/api/")]) >= 18


def test_the_committed_page_is_the_route_tables(saver: BaseCheckpointSaver[Any]) -> None:
    assert PAGE.read_text(encoding="utf-8") == reference(create_app(saver)), (
        f"docs/dashboard-api.md is out of date with the dashboard's routes: {REGENERATE}"
    )


async def _undescribed(request: Request) -> Response:
    return JSONResponse({})


async def _no_body_said(request: Request) -> Response:
    """Does something.

    Answers: 200."""
    return JSONResponse({})


def test_a_route_without_a_description_fails_the_reference(
    saver: BaseCheckpointSaver[Any],
) -> None:
    app = create_app(saver)
    app.router.routes.append(Route("/api/undescribed", _undescribed))
    app.router.routes.append(Route("/api/silent", _no_body_said, methods=["POST"]))
    assert undocumented(app) == [
        "GET /api/undescribed: no docstring",
        "POST /api/silent: no 'Body:' paragraph",
    ]
    with pytest.raises(UndocumentedRouteError, match="GET /api/undescribed: no docstring"):
        reference(app)
