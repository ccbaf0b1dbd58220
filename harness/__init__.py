"""The harness check.py and bench.py stand on, for any KernelBench problem.

    problem    loading a problem file (Model, get_inputs, get_init_inputs, module-level
               sizes that --set overrides) and a candidate class
    protocol   KernelBench's seeds, precisions, tolerances and device moves
    compare    comparisons with the reference and with an fp64 oracle
    checker    the check: KernelBench's trials with diagnostics, and its report
    strict     --strict: the checks that catch a candidate gaming the check
    memory     the device bytes a check needs, worked out before it runs
    batch      --problems: every problem/candidate pair of a folder, each in its own process
    forkserver those processes forked from one that imported torch once (Linux)
"""
