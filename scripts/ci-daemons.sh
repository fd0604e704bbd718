#!/usr/bin/env bash
# ci-daemons.sh starts the real Debian egress proxies that the egress
# integration tests (internal/egress/daemons_test.go) run against, on
# 127.0.0.1 only (docs/egress.md "Failures"):
#
#   danted    (dante-server 1.4, SOCKS5, no auth)     127.0.0.1:11080
#   tinyproxy (1.11, HTTP CONNECT, BasicAuth)         127.0.0.1:18888
#
# Usage, as root on Debian 12:
#
#   env=$(scripts/ci-daemons.sh) && eval "$env"   # install if needed, start, export env
#   trap ci_daemons_stop EXIT                      # defined by the eval: kill by PID, remove the run dir
#   SCOOTGATE_REQUIRE_DAEMONS=1 go test -race -count=1 ./internal/egress/
#
# (A bare eval "$(scripts/ci-daemons.sh)" hides a failed start: eval of an
# empty string succeeds.)
#
# stdout carries only the lines meant for eval; everything else goes to
# stderr. The daemons outlive this script and are stopped by recorded PID
# (`scripts/ci-daemons.sh stop DIR` is what ci_daemons_stop runs).
#
# Rules: dante lets 127.0.0.0/8 connect to 127.0.0.1 on any port except
# port 9, which a block rule denies so tests can see a SOCKS "connection not
# allowed by ruleset" reply (exported as SCOOTGATE_DANTE_DENIED_PORT). Nothing
# may leave the machine: every other destination is blocked. tinyproxy has
# no ConnectPort line, which in 1.11 allows CONNECT to every port (checked:
# ephemeral ports of httptest servers, TLS and plain HTTP targets), and its
# Allow line admits loopback clients only.
set -euo pipefail

readonly DANTE_PORT=11080
readonly DANTE_DENIED_PORT=9
readonly TINYPROXY_PORT=18888
readonly TINYPROXY_USER=sguser
readonly TINYPROXY_PASS=sgpass

log() { printf 'ci-daemons: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# Shared helpers: listening, wait_port, stop.
# shellcheck source=ci-lib.sh
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/ci-lib.sh"

install_packages() {
	if command -v danted >/dev/null && command -v tinyproxy >/dev/null; then
		return 0
	fi
	log "installing dante-server tinyproxy"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq --no-install-recommends dante-server tinyproxy >&2
}

start() {
	[[ $(id -u) == 0 ]] || die "must run as root (installs packages, danted drops to nobody)"
	[[ -r /etc/debian_version ]] || die "needs Debian (apt-get)"
	install_packages

	local port
	for port in "$DANTE_PORT" "$TINYPROXY_PORT"; do
		! listening "$port" || die "127.0.0.1:$port is already in use"
	done

	local run
	run=$(mktemp -d /tmp/scootgate-ci-daemons.XXXXXX)
	# The daemons drop to nobody; they only need to append to their logs.
	chmod 0755 "$run"
	touch "$run/danted.log" "$run/tinyproxy.log"
	chown nobody:nogroup "$run/danted.log" "$run/tinyproxy.log"
	# Stop whatever started if anything below fails.
	trap 'stop "$run"' ERR

	cat >"$run/danted.conf" <<EOF
logoutput: $run/danted.log
internal: 127.0.0.1 port = $DANTE_PORT
external: 127.0.0.1
socksmethod: none
clientmethod: none
user.privileged: root
user.unprivileged: nobody
client pass {
  from: 127.0.0.0/8 to: 0.0.0.0/0
}
socks block {
  from: 127.0.0.0/8 to: 127.0.0.1/32 port = $DANTE_DENIED_PORT
  log: connect error
}
socks pass {
  from: 127.0.0.0/8 to: 127.0.0.1/32
  command: connect
  log: error
}
socks block {
  from: 0.0.0.0/0 to: 0.0.0.0/0
  log: connect error
}
EOF

	cat >"$run/tinyproxy.conf" <<EOF
User nobody
Group nogroup
Port $TINYPROXY_PORT
Listen 127.0.0.1
Timeout 60
MaxClients 100
Allow 127.0.0.1
LogFile "$run/tinyproxy.log"
LogLevel Info
BasicAuth $TINYPROXY_USER $TINYPROXY_PASS
EOF

	danted -V -f "$run/danted.conf" >&2 || die "danted rejected $run/danted.conf"

	# Foreground mode, so $! is the daemon's own PID; stdio detached from
	# the caller's command substitution so eval does not wait for them.
	danted -f "$run/danted.conf" -p "$run/danted.own.pid" -N 1 \
		</dev/null >>"$run/danted.out" 2>&1 &
	echo $! >"$run/danted.pid"
	tinyproxy -d -c "$run/tinyproxy.conf" \
		</dev/null >>"$run/tinyproxy.out" 2>&1 &
	echo $! >"$run/tinyproxy.pid"

	wait_port danted "$(<"$run/danted.pid")" "$DANTE_PORT" "$run/danted.log"
	wait_port tinyproxy "$(<"$run/tinyproxy.pid")" "$TINYPROXY_PORT" "$run/tinyproxy.log"
	trap - ERR
	log "danted pid $(<"$run/danted.pid"), tinyproxy pid $(<"$run/tinyproxy.pid"), run dir $run"

	local self
	self=$(readlink -f "${BASH_SOURCE[0]}")
	printf 'export SCOOTGATE_DANTE_ADDR=127.0.0.1:%s\n' "$DANTE_PORT"
	printf 'export SCOOTGATE_DANTE_DENIED_PORT=%s\n' "$DANTE_DENIED_PORT"
	printf 'export SCOOTGATE_TINYPROXY_URL=http://%s:%s@127.0.0.1:%s\n' \
		"$TINYPROXY_USER" "$TINYPROXY_PASS" "$TINYPROXY_PORT"
	printf 'export SCOOTGATE_CI_DAEMONS_DIR=%q\n' "$run"
	printf 'ci_daemons_stop() { %q stop %q; }\n' "$self" "$run"
}

case ${1:-start} in
start) start ;;
stop)
	[[ $# == 2 ]] || die "usage: $0 stop DIR"
	stop "$2"
	;;
*) die "usage: $0 [start | stop DIR]" ;;
esac
