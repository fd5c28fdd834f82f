#!/usr/bin/python3
"""Every program a test needs is installed by scripts/test, or is always there,
or the tests that use it skip (77) without it: so that a fresh Debian 12
machine, where only the README's commands ran, passes `scripts/test`.

    check_tools.py SOURCE_ROOT            the check (test tools_installed)
    check_tools.py --self-test SOURCE_ROOT  plants each kind of gap in a
                                            scratch copy and fails unless
                                            every one is caught

The one list of packages is KILN_PACKAGES in scripts/common.sh (read by
sourcing it in bash, as scripts/test does). tests/tools.txt maps each program
the tests and what they run (bench/run, scripts/test) call to its Debian
package and says how it gets there:

  installed  its package is in KILN_PACKAGES (PACKAGE/VIA: it comes with
             VIA, a package of KILN_PACKAGES that depends on it);
  essential  its package is Essential in Debian (on every Debian system; on
             Debian this is checked with dpkg-query);
  skips      scripts/test does not install it; each file named on the row
             exits 77 (SKIP) without it;
  optional   scripts/test does not install it; each file named on the row
             uses it only where it is there.

Fails, naming each, when
  - a program looked up in the scanned sources is not in tools.txt: the
    scan finds `command -v X` (also over a `for p in X Y; do ... command -v
    "$p"` list), shutil.which("X"), find_program('X'), a subprocess argv
    starting with "X", and every /usr/bin/X, /usr/sbin/X, /bin/X;
  - an `installed` row's package (or VIA) is not in KILN_PACKAGES, or VIA,
    where installed, does not depend on the package (three levels deep);
  - an `essential` row's package is not Essential (checked where dpkg-query
    answers for it);
  - a `skips` row names a file that has no exit 77 / SKIP, or none; an
    `optional` row a file that does not name the program, or none;
  - where an `installed` or `essential` row's package is installed, it does
    not ship the program (dpkg-query
    -L has no .../bin/X or .../sbin/X, and X is no alternatives link), so the
    table cannot name the wrong package for long.
Nothing here needs any of the programs installed: on a machine with none of
them, the first three checks still run and tell what scripts/test would miss.
"""
import functools
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

# Sources of the tests and of what they run. scripts/common.sh is not among
# them: its own programs (dpkg-query, apt-get, sudo) install the rest.
SCANNED = ["tests/**/*.sh", "tests/**/*.py", "tests/**/*.c", "tests/**/meson.build",
           "bench/run", "bench/load.sh", "bench/kilnbench/*.py", "bench/meson.build",
           "client/python/tests/*.py", "client/python/meson.build",
           "client/fortran/tests/*.sh", "client/fortran/meson.build",
           "fuzz/meson.build", "scripts/test"]
# Programs this build makes, the scan's own helpers, and names the patterns
# catch that are no programs.
OURS = {"kiln", "kilnd", "kiln-exec", "run.sh", "load.sh"}
# This check's own text names programs only as examples.
NOT_SCANNED = {"tests/check_tools.py"}
MODES = ("installed", "essential", "skips", "optional")

PATTERNS = [
    re.compile(r"command -v ([A-Za-z0-9_][\w+.-]*)"),
    re.compile(r"shutil\.which\(\s*[\"']([^\"'/$]+)[\"']"),
    re.compile(r"find_program\(\s*'([^']+)'"),
    re.compile(r"(?:run|Popen|check_output|check_call|call)\(\s*\[\s*[\"']([\w+.-]+)[\"']"),
    # A path ends where a string or a word does: "/usr/bin/c\nc" is none.
    re.compile(r"[\"' =(]/(?:usr/)?s?bin/([\w+-]+(?:\.[\w+-]+)*)(?=[\"' \n;)]|\.\s)"),
]
FOR_LOOP = re.compile(r"for (\w+) in ([^;\n]+); do(?:(?!done).){0,300}?command -v \"?\$\{?\1\b",
                      re.S)


def packages(root):
    """KILN_PACKAGES, as scripts/test sees it."""
    out = subprocess.run(["bash", "-c", 'source "$1" && printf "%s\\n" "${KILN_PACKAGES[@]}"',
                          "bash", os.path.join(root, "scripts", "common.sh")],
                         stdout=subprocess.PIPE, check=True, text=True).stdout
    return set(out.split())


def table(root):
    """tools.txt: tool -> (package, mode, files)."""
    rows = {}
    with open(os.path.join(root, "tests", "tools.txt")) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].split()
            if not line:
                continue
            if len(line) < 3 or line[2] not in MODES:
                raise SystemExit(f"tests/tools.txt:{n}: PROGRAM PACKAGE[/VIA] "
                                 f"{'|'.join(MODES)} [FILE...] expected")
            rows[line[0]] = (line[1], line[2], line[3:])
    return rows


def scan(root):
    """tool -> the first source that calls it."""
    found = {}
    for pat in SCANNED:
        for path in sorted(glob.glob(os.path.join(root, pat), recursive=True)):
            rel = os.path.relpath(path, root)
            if rel in NOT_SCANNED:
                continue
            try:
                with open(path, errors="replace") as f:
                    text = f.read()
            except OSError:
                continue
            names = [m.group(1) for p in PATTERNS for m in p.finditer(text)]
            for m in FOR_LOOP.finditer(text):
                names += m.group(2).split()
            for name in names:
                name = os.path.basename(name)
                if name and name not in OURS and not name.startswith("$"):
                    found.setdefault(name, rel)
    return found


@functools.lru_cache(maxsize=None)
def dpkg(*args):
    """dpkg-query's output, or None where it cannot answer."""
    if not shutil.which("dpkg-query"):
        return None
    r = subprocess.run(["dpkg-query", *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                       text=True)
    return r.stdout if r.returncode == 0 else None


def ships(pkg, tool):
    """False only when pkg is installed and ships no program tool."""
    files = dpkg("-L", pkg)
    if files is None:
        return True   # not installed (a fresh machine), or not Debian: nothing to check
    if os.path.lexists("/etc/alternatives/" + tool):
        return True   # c++, cc, ...: the package provides it through an alternative
    return any(re.search(r"/s?bin/" + re.escape(tool) + r"$", f) for f in files.splitlines())


def depends_on(via, pkg, depth=3):
    """False only when via is installed and none of its dependencies, down
    to depth levels (installed ones only), is pkg."""
    if depth == 0:
        return False
    deps = dpkg("-W", "-f=${Depends}, ${Pre-Depends}", via)
    if deps is None:
        return depth == 3   # via not installed: nothing to check
    names = set(re.findall(r"(?:^|[,|]\s*)([a-z0-9][a-z0-9+.-]*)", deps))
    return pkg in names or any(depends_on(n, pkg, depth - 1) for n in names
                               if dpkg("-W", "-f=${Version}", n) is not None)


def file_ok(root, tool, mode, rel):
    """A complaint about a skips or optional row's file, or None."""
    try:
        with open(os.path.join(root, rel)) as f:
            text = f.read()
    except OSError:
        return f"{tool}: {rel} does not exist"
    if mode == "skips" and not re.search(r"\b77\b|SKIP", text):
        return f"{tool}: {rel} never skips (77) without it"
    if mode == "optional" and tool not in text:
        return f"{tool}: {rel} does not test for it"
    return None


def check_row(root, pkgs, tool, pkg, mode, files):
    """The complaints about one row of tools.txt."""
    bad = []
    pkg, _, via = pkg.partition("/")
    if mode == "installed" and (via or pkg) not in pkgs:
        bad.append(f"{tool}: its package {via or pkg} is not in KILN_PACKAGES "
                   "(scripts/common.sh), so scripts/test does not install it")
    elif mode == "installed" and via and not depends_on(via, pkg):
        bad.append(f"{tool}: {via} does not depend on {pkg}")
    if mode == "essential":
        ess = dpkg("-W", "-f=${Essential}", pkg)
        if ess is not None and ess.strip() != "yes":
            bad.append(f"{tool}: {pkg} is not an Essential package: add it to KILN_PACKAGES")
    if mode in ("skips", "optional"):
        if not files:
            bad.append(f"{tool}: a '{mode}' row names no file")
        bad += [b for b in (file_ok(root, tool, mode, rel) for rel in files) if b]
    if mode in ("installed", "essential") and not ships(pkg, tool):
        bad.append(f"{tool}: the installed package {pkg} has no program {tool}")
    return bad


def check(root):
    pkgs, rows, found = packages(root), table(root), scan(root)
    bad = []
    for tool, src in sorted(found.items()):
        if tool not in rows:
            bad.append(f"{tool}: called by {src}, but not in tests/tools.txt (say which "
                       "package has it, and whether scripts/test installs it)")
    for tool, (pkg, mode, files) in sorted(rows.items()):
        bad += check_row(root, pkgs, tool, pkg, mode, files)
    for b in bad:
        print("FAIL:", b)
    if not bad:
        print(f"{len(rows)} programs in tests/tools.txt, {len(found)} called by the scanned "
              f"sources; KILN_PACKAGES has {len(pkgs)} packages")
    return 1 if bad else 0


def self_test(root):
    """Each kind of gap in a scratch copy must fail the check."""
    plants = [
        ("tests/integration/test_top.sh", "command -v tmux", "command -v nosuchtool"),
        ("bench/kilnbench/cli.py", 'shutil.which("ccache")', 'shutil.which("nosuchtool")'),
        ("tests/slurm/test_slurm.sh", "for prog in munged ", "for prog in nosuchtool munged "),
        ("scripts/common.sh", "\n\tccache\n", "\n"),
        ("tests/tools.txt", "\ntmux ", "\n# tmux "),
        ("tests/tools.txt", "tests/integration/test_cuda.c tests/integration/test_gpu.c",
         "tests/check_layers.py"),
        ("tests/tools.txt", "optional   tests/integration/test_cache.c",
         "optional   tests/check_layers.py"),
        ("tests/tools.txt", "tmux             installed", "tmux             skips"),
    ]
    failed = 0
    with tempfile.TemporaryDirectory(prefix="kiln-check-tools-") as tmp:
        for rel, old, new in plants:
            copy = os.path.join(tmp, "tree")
            shutil.rmtree(copy, ignore_errors=True)
            for pat in SCANNED + ["scripts/common.sh", "tests/tools.txt"]:
                for path in glob.glob(os.path.join(root, pat), recursive=True):
                    dst = os.path.join(copy, os.path.relpath(path, root))
                    os.makedirs(os.path.dirname(dst), exist_ok=True)
                    shutil.copy(path, dst)
            p = os.path.join(copy, rel)
            with open(p) as f:
                text = f.read()
            if old not in text:
                print(f"FAIL: self-test: {rel} no longer has {old!r}")
                failed = 1
                continue
            with open(p, "w") as f:
                f.write(text.replace(old, new, 1))
            with open(os.devnull, "w") as null:
                saved, sys.stdout = sys.stdout, null
                try:
                    rc = check(copy)
                finally:
                    sys.stdout = saved
            print(f"{'caught' if rc else 'MISSED'}: {rel}: {old!r} -> {new!r}")
            failed |= rc == 0
        rc = check(root)
    return 1 if failed or rc else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--self-test":
        sys.exit(self_test(sys.argv[2]))
    if len(sys.argv) != 2:
        print(__doc__.split("\n\n")[1])
        sys.exit(2)
    sys.exit(check(sys.argv[1]))
