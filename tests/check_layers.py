#!/usr/bin/python3
"""kilnd's layers point one way, down (docs/design.md, "The layers of kilnd"):
services in daemon/, then daemon/build/, daemon/tier/, daemon/server/, and
main.c and lifecycle.c on top. Fails, naming each, when a file includes the
header of a higher layer; store/ and proto/ must include nothing of daemon/."""
import os
import re
import sys

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..')
layers = [('daemon', 0), ('daemon/build', 1), ('daemon/tier', 2), ('daemon/server', 3)]
top = {'main.c': 4, 'lifecycle.c': 4, 'lifecycle.h': 4}
rank, path = {}, {}
for sub, r in layers:
    for f in os.listdir(os.path.join(root, sub)):
        if f.endswith(('.c', '.h')):
            rank[f] = top.get(f, r)
            path[f] = os.path.join(sub, f)
lower = {}
for sub in ('store', 'proto'):
    for f in os.listdir(os.path.join(root, sub)):
        if f.endswith(('.c', '.h')):
            lower[os.path.join(sub, f)] = -1
bad = 0
checked = list(path.items()) + [(os.path.basename(p), p) for p in lower]
for name, rel in checked:
    mine = lower.get(rel, rank.get(name))
    with open(os.path.join(root, rel)) as fh:
        for inc in re.findall(r'#include "([^"]+)"', fh.read()):
            if inc in rank and rank[inc] > mine:
                print(f'{rel} includes {inc}, a higher layer\'s header')
                bad += 1
print(f'{len(checked)} files checked, {bad} upward includes')
sys.exit(1 if bad else 0)
