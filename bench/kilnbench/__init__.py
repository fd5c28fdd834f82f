"""kilnbench: the kiln benchmark suite that bench/run starts (cli.main).

Modules: common (constants, log, statistics, the machine, the compiler
wrapper's log), build (meson and ninja), harness (class Bench: kilnd, rank
processes, cleanup), baselines (the baseline modes, a mixin of Bench),
workload (calibration and bench/gen.py), scenarios, report (the table, the
markdown report, the sweep's plot) and cli (the options and main). Standard
library only; installing packages is scripts/bench's.
"""
