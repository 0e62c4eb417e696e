"""The hostile-input corpus reuses the CRI server harness and the image test helpers."""

from cri.conftest import bridge, harness, image_layouts  # noqa: F401
