#!/usr/bin/python3
"""The tests' indexes cannot drift from the tests (as libuv's test-list.h).

    check_index.py [ROOT]        checks the tree at ROOT (default: this repository)
    check_index.py --self-test   plants each kind of drift in a scratch copy
                                 and fails unless every one is caught

One name per test: the file tests/test_<name>.c is meson's unit test <name>,
tests/integration/test_<name>.c (or .sh) is meson's it_<name>, and that name
is the one a commit cites. Fails, naming each, when
  - a unit suite tests/test_<name>.c is no meson test <name>, or is missing
    from docs/design.md's tests row, or the row names a suite with no file;
  - a tests/check_*.py is not named in that row;
  - an integration file test_<name>.c/.sh is no meson test it_<name>, or has
    no row in tests/integration/README.md's table, or a row names a file
    that is not there;
  - a helper .c of tests/integration/ is not named in its README.
"""
import os
import re
import shutil
import sys
import tempfile


def read(root, rel):
    path = os.path.join(root, rel)
    return open(path).read() if os.path.exists(path) else ''


def meson_tests(root):
    """The names meson gives tests, from every meson.build under tests/,
    bench/ and client/python/: test('name', ...) calls, the unit_tests and
    integration_tests dictionaries (their keys, with it_ for the latter)."""
    names = set()
    for rel in ('tests/meson.build', 'tests/integration/meson.build', 'bench/meson.build',
                'client/python/meson.build'):
        text = read(root, rel)
        names |= set(re.findall(r"\btest\(\s*'([^']+)'", text))
        for dict_name, prefix in (('unit_tests', ''), ('integration_tests', 'it_')):
            m = re.search(dict_name + r'\s*=\s*\{(.*?)\n\}', text, re.S)
            if m:
                names |= {prefix + k for k in re.findall(r"^\s*'([^']+)'\s*:", m.group(1), re.M)}
    return names


def design_tests_row(root):
    m = re.search(r'^\| `tests/` \|(.*)$', read(root, 'docs/design.md'), re.M)
    return m.group(1) if m else None


def check(root):
    errors = []
    names = meson_tests(root)
    row = design_tests_row(root)
    if row is None:
        return ['docs/design.md: no row for `tests/` in the parts table']
    listed = set(re.findall(r'`(test_[a-z0-9_]+)`', row))
    tests_dir = os.path.join(root, 'tests')
    units = {f[:-2] for f in os.listdir(tests_dir) if re.fullmatch(r'test_[a-z0-9_]+\.c', f)}
    for u in sorted(units):
        if u[5:] not in names:
            errors.append(f'tests/{u}.c: no meson test named {u[5:]}')
        if u not in listed:
            errors.append(f'docs/design.md: the tests row does not name {u}')
    for u in sorted(listed - units):
        errors.append(f'docs/design.md: the tests row names {u}, which has no tests/{u}.c')
    for f in sorted(os.listdir(tests_dir)):
        if re.fullmatch(r'check_[a-z0-9_]+\.py', f) and f'`{f}`' not in row:
            errors.append(f'docs/design.md: the tests row does not name tests/{f}')
    it_dir = os.path.join(tests_dir, 'integration')
    readme = read(root, 'tests/integration/README.md')
    rows = set(re.findall(r'^\| `([^`]+)`', readme, re.M))
    for f in sorted(os.listdir(it_dir)):
        m = re.fullmatch(r'test_([a-z0-9_]+)\.(c|sh)', f)
        if m:
            if 'it_' + m.group(1) not in names:
                errors.append(f'tests/integration/{f}: no meson test named it_{m.group(1)}')
            if f not in rows:
                errors.append(f'tests/integration/README.md: no row for {f}')
        elif f.endswith('.c') and f'`{f}`' not in readme:
            errors.append(f'tests/integration/README.md: does not name {f}')
    for r in sorted(rows):
        if r.startswith('test_') and not os.path.exists(os.path.join(it_dir, r)):
            errors.append(f'tests/integration/README.md: a row for {r}, which is not there')
    return errors


def report(root):
    errors = check(root)
    for e in errors:
        print(e)
    print(f'{len(meson_tests(root))} meson tests, {len(errors)} problems')
    return 1 if errors else 0


def self_test(root):
    plants = {
        'a unit suite without its row': ('tests/test_planted.c', 'w', '/* planted */\n',
                                         'does not name test_planted'),
        'an integration file without a row': ('tests/integration/test_planted.c', 'w',
                                              '/* planted */\n', 'no row for test_planted.c'),
        'a row without its file': ('tests/integration/README.md', 'a',
                                   '| `test_gone.c` | planted |\n', 'which is not there'),
        'a check without its row': ('tests/check_planted.py', 'w', '# planted\n',
                                    'does not name tests/check_planted.py'),
    }
    failures = 0
    folders = ('tests', 'docs', 'bench', 'client/python')
    for what, (rel, mode, text, expect) in plants.items():
        with tempfile.TemporaryDirectory() as tmp:
            for folder in folders:
                shutil.copytree(os.path.join(root, folder), os.path.join(tmp, folder),
                                ignore=shutil.ignore_patterns('__pycache__', '*.o'))
            with open(os.path.join(tmp, rel), mode) as fh:
                fh.write(text)
            caught = [e for e in check(tmp) if expect in e]
            print(f'{what}: {"caught: " + caught[0] if caught else "NOT CAUGHT"}')
            failures += not caught
    with tempfile.TemporaryDirectory() as tmp:
        for folder in folders:
            shutil.copytree(os.path.join(root, folder), os.path.join(tmp, folder),
                            ignore=shutil.ignore_patterns('__pycache__', '*.o'))
        extra = check(tmp)
        print(f'the unplanted copy: {len(extra)} problems')
        failures += bool(extra)
    return 1 if failures else 0


if __name__ == '__main__':
    args = sys.argv[1:]
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
    if args and args[0] == '--self-test':
        sys.exit(self_test(args[1] if len(args) > 1 else here))
    sys.exit(report(args[0] if args else here))
