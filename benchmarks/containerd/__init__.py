"""Helpers of bench_vs_containerd: a private containerd (``instance``), the images and the
registry both servers use (``images``), the table (``report``), CPU per side (``cpu``), the
bare-runtime floors (``floors``)."""
