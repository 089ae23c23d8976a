"""Chip, memory and interconnect library and its resolution to a System. Knows no workloads."""
