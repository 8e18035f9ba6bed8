"""Tools: the registry and bundles, the built-in tools, and how tool calls are executed."""

from aimegraph.sandbox import Workspace
from aimegraph.tools.calculator import calculator
from aimegraph.tools.files import make_file_tools
from aimegraph.tools.knowledge import make_knowledge_search_tool
from aimegraph.tools.policy import ToolRetry, with_policy
from aimegraph.tools.progress import submit_result, update_progress
from aimegraph.tools.python import make_python_tool
from aimegraph.tools.registry import (
    ToolBundle,
    ToolRegistry,
    ToolRegistryError,
    default_registry,
)
from aimegraph.tools.shell import make_shell_tool

__all__ = [
    "ToolBundle",
    "ToolRegistry",
    "ToolRegistryError",
    "ToolRetry",
    "Workspace",
    "calculator",
    "default_registry",
    "make_file_tools",
    "make_knowledge_search_tool",
    "make_python_tool",
    "make_shell_tool",
    "submit_result",
    "update_progress",
    "with_policy",
]
