"""The result folder of a plan and its terminal views.

write.py writes summary.json, kernels.csv, configs.csv, trace.json, mapping.dot/.svg,
report.html and plan.txt; terminal.py and explain.py are what `mapshard run` and `mapshard
explain` print; bounds.py is `mapshard bounds`. Writers read records (solver.plan,
mapshard.views); they never solve.
"""
