"""The bottom layer: the setup schema (generated protobuf module), parsing, validation, the
error types and the DFModel seam (dfmodel.py: DFModel's topology variants, `gurobi` block and
`execution.compute_util` turned into native fields once, after validation, with an origin map
so later messages name the user's fields). Nothing here imports any other MapShard package."""
