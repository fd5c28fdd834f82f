#!/usr/bin/python3
"""kilnd's layers point one way, down (docs/design.md, "The layers of kilnd").

    check_layers.py [ROOT]        checks the tree at ROOT (default: this repository)
    check_layers.py --self-test   plants each kind of violation in a scratch tree
                                  and fails unless every one is caught

Files are ranked by their path, not their name: proto/ and store/ at the
bottom (they include nothing of daemon/), then the services in daemon/, the
flights in daemon/flight/, the tier in daemon/tier/, the server in
daemon/server/, and main.c and lifecycle.c on top. An #include "x.h" is
resolved as the compiler's -I list would: the including file's own folder
first, else the one header of that name in the tree (two headers of one
name are an error: which one a file gets would depend on the -I order).
Fails, naming each, when
  - a file includes the header of a higher layer;
  - a folder's private header (NAME_int.h) is included from another folder;
  - docs/design.md's layer table does not name exactly the .c files of each
    folder (the map and the tree must not drift apart);
  - a row of proto/ops.def names a handler that its family's file,
    daemon/server/op_<family>.c, does not define, or an op_*.c file is no
    row's family (one op, one row, one file);
  - an owner's call is made outside its owner (OWNERS: the flight's moves
    and end in flight.c, the entry by request key in the hit's owner, an
    alias's claim in the alias's owner), comments aside.
"""
import os
import re
import shutil
import sys
import tempfile

# (folder, rank, the design table's layer name); files listed in TOP rank
# above every folder.
LAYERS = [('proto', 0, 'wire'), ('store', 1, 'store'), ('daemon', 2, 'services'),
          ('daemon/flight', 3, 'flight'), ('daemon/tier', 4, 'tier'),
          ('daemon/server', 5, 'server')]
TOP = {'daemon/main.c': 6, 'daemon/lifecycle.c': 6, 'daemon/lifecycle.h': 6}
# Programs of their own beside the layers (kiln-exec, kiln-observe.so): named
# in the paragraph under the table.
BESIDE = {'daemon/exec.c', 'daemon/exec_watch.c', 'daemon/observe.c', 'daemon/observe_exec.c',
          'daemon/observe_path.c',
          'daemon/observe_image.c'}

# (what, the pattern, the files it may appear in): the owners' calls.
OWNERS = [
    ("a flight's move", r'\bflight_enter\s*\(', {'daemon/flight/flight.c'}),
    ("a flight's end", r'\bflight_finish\s*\(', {'daemon/flight/flight.c'}),
    ('the entry by request key', r'\bstore_get_by_rkey\s*\(',
     {'daemon/flight/hit.c', 'daemon/flight/prewarm.c'}),
    ("an alias's claim", r'\bCLAIM_ALIAS\b|\bclaims_(?:release|abandon|progress)\s*\(',
     {'daemon/claims.c', 'daemon/claims.h', 'daemon/flight/alias.c'}),
]


def sources(root):
    """Path -> rank of every .c and .h in the layers' folders."""
    rank = {}
    for folder, r, _ in LAYERS:
        d = os.path.join(root, folder)
        for f in sorted(os.listdir(d)):
            if f.endswith(('.c', '.h')) and os.path.isfile(os.path.join(d, f)):
                rel = folder + '/' + f
                rank[rel] = TOP.get(rel, r)
    return rank


def resolve(inc, rel, by_name, rank):
    """The path an #include "inc" of rel reaches, or None (a system or
    generated header), or a list of candidates when ambiguous."""
    own = os.path.dirname(rel) + '/' + inc
    if own in rank:
        return own
    cands = by_name.get(os.path.basename(inc), [])
    if len(cands) == 1:
        return cands[0]
    return cands or None


def check_includes(root, rank):
    by_name = {}
    for p in rank:
        by_name.setdefault(os.path.basename(p), []).append(p)
    errors = []
    for name, paths in sorted(by_name.items()):
        if name.endswith('.h') and len(paths) > 1:
            errors.append(f'{" and ".join(paths)}: two headers named {name} (ranked by path, '
                          f'but #include "{name}" would reach either)')
    for rel, mine in sorted(rank.items()):
        with open(os.path.join(root, rel)) as fh:
            text = fh.read()
        for inc in re.findall(r'^\s*#\s*include\s+"([^"]+)"', text, re.M):
            got = resolve(inc, rel, by_name, rank)
            if got is None or isinstance(got, list):
                continue
            if rank[got] > mine:
                errors.append(f'{rel} includes {got}, a higher layer\'s header')
            if got.endswith('_int.h') and os.path.dirname(got) != os.path.dirname(rel):
                errors.append(f'{rel} includes {got}, the private header of another folder')
    return errors


def design_table(root):
    """Layer name -> the set of file names (backticked) in its row of
    docs/design.md's layer table."""
    path = os.path.join(root, 'docs', 'design.md')
    if not os.path.exists(path):
        return None, ''
    text = open(path).read()
    m = re.search(r'^\| layer \| files \| knows \|\n\|[- |]+\|\n((?:\|.*\|\n)+)', text, re.M)
    if not m:
        return {}, text
    rows = {}
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in line.strip('|').split('|')]
        if len(cells) >= 2:
            rows[cells[0]] = set(re.findall(r'`([^`]*?\.c)`', cells[1]))
    return rows, text[m.end():m.end() + 2000]


def check_design(root, rank):
    rows, after = design_table(root)
    if rows is None:
        return []
    if not rows:
        return ['docs/design.md: no layer table ("| layer | files | knows |")']
    errors = []
    beside = set(re.findall(r'`(?:daemon/)?([^`/]*?\.c)`', after.split('\n\n')[0]))
    want_rows = {layer: folder for folder, _, layer in LAYERS}
    want_rows['top'] = 'daemon'
    for layer, folder in want_rows.items():
        if layer not in rows:
            errors.append(f'docs/design.md: the layer table has no row "{layer}"')
            continue
        if layer in ('wire', 'store'):
            continue   # named by folder
        named = {os.path.basename(f) for f in rows[layer]}
        if layer == 'top':
            have = {os.path.basename(p) for p in TOP if p.endswith('.c')}
        else:
            have = {os.path.basename(p) for p in rank
                    if p.endswith('.c') and os.path.dirname(p) == folder
                    and p not in TOP and p not in BESIDE}
        for f in sorted(have - named):
            errors.append(f'docs/design.md: {folder}/{f} is missing from the "{layer}" row')
        for f in sorted(named - have):
            errors.append(f'docs/design.md: the "{layer}" row names {f}, which is not in {folder}/')
    for p in sorted(BESIDE):
        if os.path.basename(p) not in beside:
            errors.append(f'docs/design.md: {p} is missing from "Beside them", under the table')
    return errors


OP_ROW = re.compile(r'^KILN_OP\(\s*(\w+)\s*,\s*"([^"]*)"\s*,\s*(\w+)\s*,\s*(\w+)\s*,'
                    r'\s*(\w+)\s*,\s*(\w+)\s*,', re.M)


def check_ops(root):
    """Each row of proto/ops.def has its handler in daemon/server/op_<family>.c,
    and each op_*.c file is some row's family."""
    path = os.path.join(root, 'proto', 'ops.def')
    if not os.path.exists(path):
        return ['proto/ops.def: missing (the table of request operations)']
    rows = OP_ROW.findall(open(path).read())
    if not rows:
        return ['proto/ops.def: no KILN_OP rows']
    errors = []
    server = os.path.join(root, 'daemon', 'server')
    families = set()
    for op, name, _parse, _pack, run, family in rows:
        families.add(family)
        rel = f'daemon/server/op_{family}.c'
        if not os.path.exists(os.path.join(root, rel)):
            errors.append(f'proto/ops.def: op {name} names family {family}, but {rel} is missing')
            continue
        text = open(os.path.join(root, rel)).read()
        if not re.search(r'^void ' + re.escape(run) + r'\(struct conn \*', text, re.M):
            errors.append(f'proto/ops.def: op {name}\'s handler {run} is not defined in {rel}')
    for f in sorted(os.listdir(server)):
        if f.startswith('op_') and f.endswith('.c') and f[3:-2] not in families:
            errors.append(f'daemon/server/{f}: no row of proto/ops.def names family {f[3:-2]}')
    return errors


def uncommented(text):
    """text without its C comments (the line breaks kept)."""
    def blank(m):
        return '\n' * m.group(0).count('\n')
    return re.sub(r'/\*.*?\*/|//[^\n]*', blank, text, flags=re.S)


def check_owners(root, rank):
    """Each owner's call is made in its owner's files only."""
    errors = []
    for rel in sorted(rank):
        if not rel.startswith('daemon/'):
            continue
        text = uncommented(open(os.path.join(root, rel)).read())
        for what, pattern, owners in OWNERS:
            if rel in owners:
                continue
            for m in re.finditer(pattern, text):
                line = text.count('\n', 0, m.start()) + 1
                errors.append(f'{rel}:{line}: {what} outside its owner '
                              f'({", ".join(sorted(owners))})')
    return errors


def check_all(root, rank):
    return (check_includes(root, rank) + check_design(root, rank) + check_ops(root) +
            check_owners(root, rank))


def check(root):
    rank = sources(root)
    errors = check_all(root, rank)
    for e in errors:
        print(e)
    print(f'{len(rank)} files checked, {len(errors)} problems')
    return 1 if errors else 0


def self_test(root):
    """Each rule, planted once in a copy of the layers' folders, must fail."""
    plants = {
        'upward include': ('daemon/kilnd.c', '#include "dispatch.h"\n', 'a higher layer'),
        'private header of another folder': ('daemon/server/server.c',
                                              '#include "upstream_int.h"\n',
                                              'private header of another folder'),
        'two headers of one name': ('daemon/tier/key.h', '/* planted */\n', 'two headers named'),
        'a file the map omits': ('daemon/flight/planted.c', '/* planted */\n',
                                 'missing from the "flight" row'),
        'an op without its file': ('proto/ops.def',
                                   'KILN_OP(PLANTED, "planted", parse_none, pack_none, '
                                   'op_planted, planted, 0)\n', 'op_planted.c is missing'),
        'a handler its file lacks': ('proto/ops.def',
                                     'KILN_OP(PLANTED, "planted", parse_none, pack_none, '
                                     'op_planted, hello, 0)\n', 'is not defined in'),
        'an op file of no row': ('daemon/server/op_planted.c', '/* planted */\n',
                                 'no row of proto/ops.def'),
        'a stage that ends its flight': ('daemon/flight/step.c',
                                         'static void planted(struct flight *b) '
                                         '{ flight_finish(b); }\n', "a flight's end outside"),
        'a move outside flight.c': ('daemon/flight/publish.c',
                                    'static void planted(struct flight *b) '
                                    '{ flight_enter(b, FLIGHT_DONE); }\n', "a flight's move outside"),
        'an rkey read beside the hit': ('daemon/server/op_get.c',
                                        'static void planted(void) { store_get_by_rkey(0, 0, 0); }\n',
                                        'the entry by request key outside'),
        "an alias's claim outside alias.c": ('daemon/server/op_lookup.c',
                                             'static int planted = CLAIM_ALIAS;\n',
                                             "an alias's claim outside"),
        "an alias's claim given up outside alias.c": ('daemon/server/op_get.c',
                                                      'static void planted(struct conn *c) '
                                                      '{ claims_release(c->d, "a", 0); }\n',
                                                      "an alias's claim outside"),
    }
    failures = 0
    for what, (rel, text, expect) in plants.items():
        with tempfile.TemporaryDirectory() as tmp:
            for folder in ('proto', 'store', 'daemon', 'docs'):
                shutil.copytree(os.path.join(root, folder), os.path.join(tmp, folder),
                                ignore=shutil.ignore_patterns('*.o', '__pycache__'))
            target = os.path.join(tmp, rel)
            mode = 'a' if os.path.exists(target) else 'w'
            with open(target, mode) as fh:
                fh.write(text)
            rank = sources(tmp)
            errors = check_all(tmp, rank)
            caught = [e for e in errors if expect in e]
            print(f'{what}: {"caught: " + caught[0] if caught else "NOT CAUGHT"}')
            failures += not caught
    with tempfile.TemporaryDirectory() as tmp:
        for folder in ('proto', 'store', 'daemon', 'docs'):
            shutil.copytree(os.path.join(root, folder), os.path.join(tmp, folder))
        clean = sources(tmp)
        extra = check_all(tmp, clean)
        print(f'the unplanted copy: {len(extra)} problems')
        failures += bool(extra)
    return 1 if failures else 0


if __name__ == '__main__':
    args = sys.argv[1:]
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
    if args and args[0] == '--self-test':
        sys.exit(self_test(args[1] if len(args) > 1 else here))
    sys.exit(check(args[0] if args else here))
