"""paramiko, imported without invoke: ``from nightowl.transports.paramiko_import import paramiko``.

paramiko's ssh_config reader (``paramiko.config``) imports invoke when paramiko is imported, for the one
thing it runs it for, an ssh_config ``Match exec``. Importing invoke costs some 85 ms of CPU (it imports
unittest.mock and asyncio), more than the rest of paramiko, in every process that opens SSH: the 3 a.m.
``triage --host`` and each process of a sweep. nightowl reads ssh_config itself (transports/ssh_config.py)
and never calls paramiko's, so paramiko is imported with invoke held back (``None`` in ``sys.modules`` for
that import only, which paramiko takes as invoke not installed); ``import invoke`` elsewhere works as ever.
Every paramiko import of nightowl goes through here first (tests/transports/test_paramiko_import.py).
"""

from __future__ import annotations

import sys


def _import_without_invoke():  # noqa: ANN202 - the paramiko module
    held_back = "paramiko" not in sys.modules and "invoke" not in sys.modules
    if held_back:
        sys.modules["invoke"] = None  # type: ignore[assignment] # the import system's "not installed"
    try:
        import paramiko
    finally:
        if held_back and sys.modules.get("invoke", ...) is None:
            del sys.modules["invoke"]
    return paramiko


paramiko = _import_without_invoke()

__all__ = ["paramiko"]
