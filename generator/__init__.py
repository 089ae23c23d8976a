"""Workload generators: a workload request -> KernelGraph phases. Knows nothing of hardware."""
