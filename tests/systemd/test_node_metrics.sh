#!/usr/bin/env bash
# Node metrics as root collects them: a kilnd of user nobody, root's
# kiln-node-metrics writing its textfile into a directory, Debian's
# prometheus-node-exporter on 127.0.0.1 reading that directory: the kiln
# families appear on /metrics with kiln_up 1 and the build counted,
# node_textfile_scrape_error is 0; root may read the kilnd's status and
# nothing else; once the kilnd stops, its file goes. Needs root, setpriv and
# prometheus-node-exporter (scripts/test installs it): skips (77) without.
# Usage: test_node_metrics.sh BUILD_DIR
set -u
build=$1
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
[ "$(id -u)" = 0 ] || skip "needs root (a kilnd of another user, and root's collector)"
command -v setpriv >/dev/null || skip "setpriv (util-linux) is not installed"
ne=$(command -v prometheus-node-exporter || command -v node_exporter) ||
	skip "prometheus-node-exporter is not installed (scripts/test installs it)"
kilnd=$build/daemon/kilnd kiln=$build/client/kiln collector=$build/systemd/kiln-node-metrics
for f in "$kilnd" "$kiln" "$collector"; do [ -e "$f" ] || fail "$f was not built"; done

tmp=$(mktemp -d /tmp/kiln-metrics-XXXXXX)
ne_pid='' kilnd_pid=''
cleanup() {
	[ -n "$ne_pid" ] && kill "$ne_pid" 2>/dev/null
	[ -n "$kilnd_pid" ] && kill "$kilnd_pid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
chmod 0755 "$tmp"
user=$tmp/user textfile=$tmp/textfile
mkdir -p "$user" "$textfile"
chown 65534:65534 "$user"
chmod 0700 "$user"
socket=$user/run/kilnd.sock
# A directory of PATH that nobody cannot search (root's, as after sudo):
# the compiler's probes there fail with EACCES, for kilnd too, and the
# build is still recorded (the path counts as out of reach).
mkdir -m 0700 "$tmp/locked"
as_nobody() {
	setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$user" \
		PATH="$tmp/locked:/usr/local/bin:/usr/bin:/bin" \
		KILN_SOCKET="$socket" KILN_CACHE_DIR="$user/cache" "$@"
}

as_nobody "$kilnd" --log-file "$user/kilnd.log" >"$tmp/kilnd.out" 2>&1 &
kilnd_pid=$!
for _ in $(seq 100); do
	[ -S "$socket" ] && break
	sleep 0.1
done
[ -S "$socket" ] || fail "kilnd as nobody did not start: $(cat "$tmp/kilnd.out")"
printf 'int kiln_metrics_test(void) { return 7; }\n' | as_nobody tee "$user/prog.c" >/dev/null
as_nobody "$kiln" build "$user/prog.c" >/dev/null || fail "a build as nobody failed"
again=$(as_nobody "$kiln" build "$user/prog.c") || fail "a second build as nobody failed"
grep -q '^cached ' <<<"$again" || fail "the same program again is no hit: $again"

# Root reads the status; anything else is refused, saying why.
KILN_DAEMON_UID=65534 "$kiln" --socket "$socket" status >/dev/null ||
	fail "root cannot read the status of nobody's kilnd"
if out=$(KILN_DAEMON_UID=65534 "$kiln" --socket "$socket" ls 2>&1); then
	fail "root listed nobody's cache: $out"
fi
grep -q "root may read its status" <<<"$out" || fail "root's refused ls says: $out"

bash "$collector" --dir "$textfile" --socket "$socket" --kiln "$kiln" || fail "kiln-node-metrics failed"
files=("$textfile"/kiln-65534-*.prom)
[ -f "${files[0]}" ] || fail "no textfile written: $(ls -la "$textfile")"
[ "$(stat -c %a "${files[0]}")" = 644 ] || fail "the textfile's mode is $(stat -c %a "${files[0]}")"

port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$ne" --web.listen-address="127.0.0.1:$port" --collector.disable-defaults --collector.textfile \
	--collector.textfile.directory="$textfile" >"$tmp/ne.log" 2>&1 &
ne_pid=$!
scrape() {
	/usr/bin/python3 - "$port" <<'EOF'
import sys, time, urllib.request
url = "http://127.0.0.1:%s/metrics" % sys.argv[1]
for _ in range(100):
    try:
        print(urllib.request.urlopen(url, timeout=5).read().decode())
        sys.exit(0)
    except OSError:
        time.sleep(0.1)
sys.exit(1)
EOF
}
metrics=$(scrape) || fail "node_exporter did not answer: $(cat "$tmp/ne.log")"
grep -q '^node_textfile_scrape_error 0$' <<<"$metrics" ||
	fail "node_exporter could not read the file: $(grep -i 'textfile\|error' <<<"$metrics" | head)"
grep -q '^kiln_up{.*user="nobody".*} 1$' <<<"$metrics" || fail "no kiln_up 1 for nobody"
grep -q '^kiln_builds_ok_total{.*user="nobody".*} 1$' <<<"$metrics" || fail "the build is not counted"
families=$(grep -c '^# TYPE kiln_' <<<"$metrics")
[ "$families" -ge 40 ] || fail "only $families kiln families on /metrics"
echo "node_exporter serves $families kiln families for nobody's kilnd"

# A stopped kilnd's file goes.
as_nobody "$kiln" stop >/dev/null || fail "kiln stop failed"
wait "$kilnd_pid" 2>/dev/null
kilnd_pid=''
bash "$collector" --dir "$textfile" --socket "$socket" --kiln "$kiln"
left=("$textfile"/kiln-*.prom)
[ ! -e "${left[0]}" ] || fail "the file of a stopped kilnd stays: ${left[*]}"
echo "ok"
