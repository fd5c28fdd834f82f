# Shared by scripts/test, demo, gpu-test and bench (sourced, not run): the
# Debian 12 packages kiln needs, installing the missing ones, and configuring
# and building a build directory.

# shellcheck shell=bash

# The one list: scripts/test installs it, and the test tools_installed checks
# that it holds every program a test calls (tests/tools.txt,
# tests/check_tools.py); scripts/bench adds only gnuplot-nox.
KILN_PACKAGES=(meson ninja-build pkg-config gcc g++ libuv1-dev libsqlite3-dev libcjson-dev
	libssl-dev check sqlite3 libmpich-dev mpich clang gfortran
	python3 python3-pytest python3-pip python3-setuptools slurm-wlm munge tmux
	# bench/run, which the test bench_counts runs.
	ccache
	# modules: the module files loaded with Lmod.
	lmod
	# node_metrics: Debian's node_exporter reading root's textfiles.
	prometheus-node-exporter
	# The vendored DaCe's dependencies (py_dace; ../shared/vendor/dace/README.md).
	python3-numpy python3-sympy python3-networkx python3-ply python3-astunparse python3-dill
	python3-yaml python3-packaging python3-typing-extensions python3-ordered-set
	python3-fparser cmake
	# The vendored GT4Py's (py_gt4py; ../shared/vendor/gt4py/README.md), and a venv
	# with pip for the pip test.
	python3-attr python3-boltons python3-cached-property python3-click python3-cytoolz
	python3-deepdiff python3-factory-boy python3-filelock python3-frozendict python3-jinja2
	python3-lark python3-mako python3-tabulate python3-toolz python3-xxhash black
	python3-executing python3-asttokens python3-venv)

kiln_say() {
	printf '%s\n' "$*" >&2
}

kiln_die() {
	kiln_say "error: $*"
	exit 1
}

# kiln_missing_packages [PACKAGE...]: prints the packages of KILN_PACKAGES,
# and the ones named, that are not installed, one per line.
kiln_missing_packages() {
	local p
	for p in "${KILN_PACKAGES[@]}" "$@"; do
		if [ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" != installed ]; then
			printf '%s\n' "$p"
		fi
	done
}

# kiln_install_deps [PACKAGE...]: installs what is missing of KILN_PACKAGES
# and the packages named (scripts/bench: gnuplot-nox) with apt-get;
# refreshes the package lists only when something is missing, so that a ready
# machine needs no network.
kiln_install_deps() {
	local missing sudo=()
	if ! command -v dpkg-query >/dev/null 2>&1; then
		kiln_say "note: not a Debian system; assuming the build dependencies are installed"
		return 0
	fi
	mapfile -t missing < <(kiln_missing_packages "$@")
	[ "${#missing[@]}" -eq 0 ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		command -v sudo >/dev/null 2>&1 ||
			kiln_die "missing packages: ${missing[*]}; run as root or install them"
		sudo=(sudo -n)
	fi
	kiln_say "installing missing packages: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	"${sudo[@]}" apt-get update -q </dev/null ||
		kiln_die "apt-get update failed"
	"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null ||
		kiln_die "apt-get install ${missing[*]} failed"
}

# kiln_build DIR [MESON_OPTION...]: configures DIR when needed (applying the
# options to an existing one) and builds it.
kiln_build() {
	local dir=$1
	shift
	if [ -f "$dir/build.ninja" ]; then
		if [ "$#" -gt 0 ]; then
			meson configure "$dir" "$@" || return 1
		fi
	elif [ -d "$dir/meson-private" ]; then
		# A configuration that was interrupted: start it again from scratch.
		meson setup --wipe "$dir" "$@" || return 1
	else
		meson setup "$dir" "$@" || return 1
	fi
	if [ -z "${KILN_BUILD_TARGETS:-}" ]; then
		ninja -C "$dir"
		return
	fi
	# Only these targets (the demo's), those this configuration has.
	local all t want=()
	all=$(ninja -C "$dir" -t targets all) || return 1
	for t in $KILN_BUILD_TARGETS; do
		grep -q "^$t:" <<<"$all" && want+=("$t")
	done
	ninja -C "$dir" "${want[@]}"
}
