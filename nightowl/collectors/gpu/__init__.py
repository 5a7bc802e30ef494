"""GPU evidence: nvidia-smi in every format, the kernel log and its Xids, NVLink, topology, DCGM."""
