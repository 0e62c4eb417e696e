"""The pods layer: CRI-shaped configs, the pure spec builders and ``SandboxManager``.

``config`` holds the CRI-shaped models, ``checks`` the field checks run before anything is
created, ``rules`` containerd's small CRI-to-OCI rules, ``sandbox_spec`` and ``container_spec``
the pure builders, and ``manager`` the ``SandboxManager`` that runs pods end to end. Users import
``podkit.sandbox`` and ``podkit.container``, the public faces.
"""
