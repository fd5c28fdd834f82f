#!/usr/bin/env bash
# completion/kiln.bash, run without the bash-completion package: its two
# helpers are stood in for (_init_completion fills cur, prev, words and
# cword from COMP_WORDS; _filedir offers "FILE"), then completions are
# checked: build's --output offers the output kinds (stats' -o/--output a
# file), top and its options, the global -V.
set -u
export LC_ALL=C
_init_completion() {
	words=("${COMP_WORDS[@]}")
	cword=$COMP_CWORD
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=${COMP_WORDS[COMP_CWORD - 1]}
}
_filedir() { COMPREPLY=(FILE); }
complete() { :; }
# shellcheck source=../../completion/kiln.bash
source "$1"
complete_words() {
	COMP_WORDS=("$@")
	COMP_CWORD=$(($# - 1))
	COMPREPLY=()
	_kiln
	printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' '
}
check() {
	local want=$1
	shift
	local got
	got=$(complete_words "$@")
	[ "$got" = "$want" ] || { echo "FAIL: '$*' completes '$got', not '$want'"; exit 1; }
}
check "cubin fatbin ptx shared " kiln build a.c --output ""
check "cubin " kiln build --output c
check "FILE " kiln stats --prometheus --output ""
check "FILE " kiln stats -o ""
check "top " kiln to
check "--zero " kiln stats --ze
check "config " kiln conf
check "max-size " kiln config ma
check "--once " kiln top --on
check "-V " kiln -V
check "c++ cc nvcc " kiln build -t ""
echo "ok: output kinds, files, top, -V and toolchains complete"
