#!/usr/bin/env bash
# kiln top on a terminal, read back from the screen: under tmux, with one
# build running (a toolchain wrapper that sleeps) and two queued (--jobs 1,
# kiln warm in another tmux session, whose progress line must say "kilnd: 1
# building, 2 queued"), the screen shows the slots, the running build with
# its label and state, the queue (a build without a label by its first
# source), and q ends it. Skips (77) without tmux. meson passes
# KILN_TEST_KILND and KILN_TEST_CLI.
set -u
command -v tmux >/dev/null || { echo "SKIP: tmux is not installed (apt-get install tmux)"; exit 77; }
T=$(mktemp -d /tmp/kiln-top.XXXXXX) || exit 1
sock=$T/s
srv=kiln-top-$$
fail() { echo "FAIL: $*"; [ -n "${screen:-}" ] && printf '%s\n' "--- screen:" "$screen"; exit 1; }
cleanup() {
	tmux -L "$srv" kill-server 2>/dev/null
	"$KILN_TEST_CLI" --socket "$sock" stop >/dev/null 2>&1
	rm -rf "$T"
}
trap cleanup EXIT
cat >"$T/wrap.sh" <<'W'
#!/bin/sh
# Slow only for builds (kilnd also runs it for --version and its programs).
case " $* " in *" -o "*) sleep 4 ;; esac
exec /usr/bin/cc "$@"
W
chmod +x "$T/wrap.sh"
for i in 1 2 3; do echo "int top$i(void) { return $i; }" >"$T/t$i.c"; done
cat >"$T/m.json" <<'M'
{"requests": [{"sources": ["t1.c"], "label": "top-one"},
              {"sources": ["t2.c"], "label": "top-two"},
              {"sources": ["t3.c"]}]}
M
"$KILN_TEST_KILND" --socket "$sock" --cache-dir "$T/c" --jobs 1 --toolchain "cc=$T/wrap.sh" \
	--daemonize >/dev/null || fail "kilnd did not start"
# warm on a terminal too: its progress line says what kilnd builds and queues.
tmux -L "$srv" new-session -d -s warm -x 110 -y 10 \
	"$KILN_TEST_CLI --socket $sock warm $T/m.json; sleep 30" || fail "tmux could not start kiln warm"
for _ in $(seq 50); do
	"$KILN_TEST_CLI" --socket "$sock" --json status | grep -q '"in_flight":1' && break
	sleep 0.1
done
tmux -L "$srv" new-session -d -s top -x 110 -y 30 \
	"echo kiln-top-was-not-here; $KILN_TEST_CLI --socket $sock top -d 0.3; echo kiln-top-ended; sleep 30" ||
	fail "tmux could not start kiln top"
screen=
for _ in $(seq 30); do
	sleep 0.2
	screen=$(tmux -L "$srv" capture-pane -p -t top 2>/dev/null)
	grep -q "requests [0-9]" <<<"$screen" && grep -q "RUNNING" <<<"$screen" && break
done
grep -q "slots 1/1 busy  2 queued" <<<"$screen" || fail "no 'slots 1/1 busy  2 queued' line"
# kilnd takes the three in any order: one compiling, two queued, each
# named (a build without a label by its first source, t3.c).
grep -Eq "compiling .* 1  (top-|t3\.c)" <<<"$screen" || fail "no running build with its state and label"
[ "$(grep -Ec "queued .* 1  (top-|t3\.c)" <<<"$screen")" = 2 ] || fail "the queue does not show two builds"
grep -Eq "(compiling|queued) .* 1  t3\.c" <<<"$screen" || fail "the unlabelled build is not named by its source"
grep -q "requests [0-9.]*/s  hits" <<<"$screen" || fail "no rates after the first frame"
for _ in $(seq 30); do
	warm_line=$(tmux -L "$srv" capture-pane -p -t warm 2>/dev/null)
	grep -q "kilnd: 1 building, 2 queued" <<<"$warm_line" && break
	sleep 0.1
done
grep -q "kilnd: 1 building, 2 queued" <<<"$warm_line" ||
	{ screen=$warm_line; fail "warm's progress line does not say 'kilnd: 1 building, 2 queued'"; }
grep -q "kiln-top-was-not-here" <<<"$screen" && fail "kiln top draws over the screen, not on the alternate one"
tmux -L "$srv" send-keys -t top q
for _ in $(seq 30); do
	screen=$(tmux -L "$srv" capture-pane -p -t top 2>/dev/null)
	if grep -q "kiln-top-ended" <<<"$screen"; then
		# The screen from before is back, and no frame of top is left.
		grep -q "kiln-top-was-not-here" <<<"$screen" || fail "the screen from before kiln top is not back"
		grep -q "RUNNING" <<<"$screen" && fail "kiln top's frame stays on the screen"
		echo "ok: kiln top drew on the alternate screen and q ended it"
		exit 0
	fi
	sleep 0.1
done
fail "q did not end kiln top"
