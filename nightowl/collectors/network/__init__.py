"""The node's network: InfiniBand/RoCE ports and their counters (``ib-ports``, ``ib-ports-window``), NIC link changes.

NIC link changes are read out of the kernel log (``nic_links``, used by the ``kernel-log`` parser); the GPUs'
own NVLink fabric stays with the GPU collectors (``collectors/gpu/fabric.py``, ``nvlink.py``).
"""
