"""The outer search over parallel choices, step-time assembly and infeasibility reasons."""
