"""Fixtures for the CRI server tests (defined in ``cri/fixtures.py``, shared with
tests/hostile, and ``started`` from ``image/registries.py``); the helpers tests import are in
``cri/helpers.py``."""

from cri.fixtures import bridge, harness, image_layouts
from image.registries import started

__all__ = ["bridge", "harness", "image_layouts", "started"]
