"""KernelGraph + System -> Plan: the MILP (Pyomo + HiGHS) and the outer parallelism search."""
