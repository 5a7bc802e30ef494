"""NCCL evidence: NCCL_DEBUG logs (with PyTorch ProcessGroupNCCL lines), NCCL RAS, nccl-tests."""
