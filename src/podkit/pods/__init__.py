"""The pods layer: CRI-shaped configs, the pure spec builders and ``SandboxManager``.

``config`` holds the CRI-shaped models, ``checks`` the field checks run before anything is
created, ``rules`` containerd's small CRI-to-OCI rules, ``security`` the resolution of security
contexts on the host (seccomp files, AppArmor profiles, capabilities), ``sandbox_spec`` and
``container_spec`` the builders applying them, ``records`` what the manager stores and reports,
``network`` the CRI-to-CNI mappings, ``images`` the pause program and image lookups. The
``SandboxManager`` (``manager``) is built from ``steps`` (run_sandbox's steps as objects),
``pause`` (the shared pause rootfs), ``store`` (records on disk), ``registry`` (the in-memory
index), ``containers`` (the container half), ``processes`` (supervisor and runtime questions)
and ``recovery`` (what ``recover()`` sweeps). Users import ``podkit.sandbox`` and
``podkit.container``, the public faces.
"""
