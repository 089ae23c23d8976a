"""MapShard: optimal mapping and sharding of workloads onto accelerator systems."""

__version__ = "0.1.0"
