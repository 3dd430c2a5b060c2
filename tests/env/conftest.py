"""tests/env/:

Needs something from the environment: root and network namespaces (lab), the qemu
Soft-RoCE guest, Slurm, Prometheus, headless Chromium, an RDMA device, a wheel build.
Each skips with the reason where its environment is missing; slow engines start once
per session.
"""
