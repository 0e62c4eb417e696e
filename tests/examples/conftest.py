"""Fixtures for the examples' tests: the CRI test images and bridge of tests/cri."""

from cri.fixtures import bridge, image_layouts

__all__ = ["bridge", "image_layouts"]
