"""Sub-command groups of the ``podkit`` command (see ``podkit.cli``)."""
