"""Fusion search: configurations as contiguous segments of a topological order."""
