"""The inner MILP: arrays and backends (linear) and the model of fixed configurations (model)."""
