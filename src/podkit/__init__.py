"""podkit: composable CRI/CNI/CDI building blocks for running pods on Linux."""

__version__ = "0.1.0.dev0"
