"""Fixtures for the CRI server tests (defined in ``cri/fixtures.py``, shared with
tests/hostile); the helpers tests import are in ``cri/helpers.py``."""

from cri.fixtures import bridge, harness, image_layouts

__all__ = ["bridge", "harness", "image_layouts"]
