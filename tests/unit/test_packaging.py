"""Issue 38, point 7: installing aimegraph (``make demo``, ``pip install -e .``) prints no
setuptools deprecation banner: the licence is a PEP 639 SPDX expression, which needs
setuptools 77 or newer to build."""

from __future__ import annotations

import tomllib
import warnings
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]


def test_the_project_metadata_raises_no_setuptools_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    from setuptools.config.pyprojecttoml import apply_configuration
    from setuptools.dist import Distribution

    monkeypatch.chdir(ROOT)  # the readme and any licence files are found from here
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the banner is a warning of the build backend
        dist = apply_configuration(Distribution(), ROOT / "pyproject.toml")
    assert dist.metadata.license_expression == "MIT"


def test_the_build_backend_understands_the_licence_expression() -> None:
    build = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]
    (setuptools,) = [r for r in map(Requirement, build["requires"]) if r.name == "setuptools"]
    assert not setuptools.specifier.contains("76.9")  # before 77: the string is refused
