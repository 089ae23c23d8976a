"""The bottom layer: the setup schema (generated protobuf module), parsing, validation, the
error types and the DFModel seam. Nothing here imports any other MapShard package."""
