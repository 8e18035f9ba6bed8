"""``aimegraph dashboard``: a local web app to watch and steer runs.

:func:`create_app` builds the ASGI app over a checkpointer; :func:`serve` runs it
with uvicorn. Needs the ``[dashboard]`` extra.
"""

from aimegraph.dashboard.app import create_app
from aimegraph.dashboard.server import serve

__all__ = ["create_app", "serve"]
