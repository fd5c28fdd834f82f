"""
What kiln.gt4py tells the user and counts, shared by its modules (gt4py.py,
_gt4py_claims.py): one line on stderr per distinct reason, and the
process's counts (kiln.gt4py.stats is this dictionary).
"""

import sys
import threading

_lock = threading.Lock()
_said = set()

# Per process: programs found in kilnd, lowered here (kilnd did not have
# them), not served by kiln.gt4py (fallbacks).
stats = {"hits": 0, "lowered": 0, "fallbacks": 0}


def say(msg):
    print("kiln.gt4py: " + msg, file=sys.stderr, flush=True)


def say_once(msg):
    with _lock:
        if msg in _said:
            return
        _said.add(msg)
    say(msg)


def count(name):
    with _lock:
        stats[name] += 1


def fallback(why):
    """A program GT4Py builds as it always does, for why (said once)."""
    count("fallbacks")
    say_once("GT4Py builds this program as usual: " + why)
