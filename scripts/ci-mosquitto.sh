#!/usr/bin/env bash
# ci-mosquitto.sh starts the real Debian MQTT broker that the delivery tests
# (internal/mqttpub) also run against, on 127.0.0.1 only (docs/usage-events.md
# "MQTT acknowledgement"):
#
#   mosquitto (2.0, MQTT 3.1.1/5, anonymous, no persistence)   127.0.0.1:18830
#
# Usage, as root on Debian 12:
#
#   env=$(scripts/ci-mosquitto.sh) && eval "$env"   # install if needed, start, export env
#   trap ci_mosquitto_stop EXIT                      # defined by the eval: kill by PID, remove the run dir
#   SCOOTGATE_REQUIRE_DAEMONS=1 go test -race -count=1 ./internal/mqttpub/
#
# (A bare eval "$(scripts/ci-mosquitto.sh)" hides a failed start: eval of an
# empty string succeeds.)
#
# stdout carries only the lines meant for eval; everything else goes to
# stderr. The broker outlives this script and is stopped by recorded PID
# (`scripts/ci-mosquitto.sh stop DIR` is what ci_mosquitto_stop runs).
#
# Persistence is off: the tests check what the broker acknowledges, not
# what it keeps across its own restart (mosquitto saves only periodically
# anyway). The listener binds 127.0.0.1
# only, so nothing outside the machine can reach it.
set -euo pipefail

readonly MOSQUITTO_PORT=18830

log() { printf 'ci-mosquitto: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# Shared helpers: listening, wait_port, stop.
# shellcheck source=ci-lib.sh
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/ci-lib.sh"

install_packages() {
	if command -v mosquitto >/dev/null || [[ -x /usr/sbin/mosquitto ]]; then
		return 0
	fi
	log "installing mosquitto"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq --no-install-recommends mosquitto >&2
}

start() {
	[[ $(id -u) == 0 ]] || die "must run as root (installs packages, mosquitto drops to its own user)"
	[[ -r /etc/debian_version ]] || die "needs Debian (apt-get)"
	install_packages
	local bin
	bin=$(command -v mosquitto || echo /usr/sbin/mosquitto)

	! listening "$MOSQUITTO_PORT" || die "127.0.0.1:$MOSQUITTO_PORT is already in use"

	local run
	run=$(mktemp -d /tmp/scootgate-ci-mosquitto.XXXXXX)
	# mosquitto drops to user mosquitto; it only reads its config. Its log
	# goes to stderr, which the shell (still root) opened for it.
	chmod 0755 "$run"
	# Stop whatever started if anything below fails.
	trap 'stop "$run"' ERR

	cat >"$run/mosquitto.conf" <<EOF
listener $MOSQUITTO_PORT 127.0.0.1
allow_anonymous true
persistence false
max_queued_messages 1000
log_dest stderr
log_type error
log_type warning
log_type notice
EOF
	chmod 0644 "$run/mosquitto.conf"

	# Foreground mode, so $! is the daemon's own PID; stdio detached from
	# the caller's command substitution so eval does not wait for it.
	"$bin" -c "$run/mosquitto.conf" </dev/null >>"$run/mosquitto.log" 2>&1 &
	echo $! >"$run/mosquitto.pid"

	wait_port mosquitto "$(<"$run/mosquitto.pid")" "$MOSQUITTO_PORT" "$run/mosquitto.log"
	trap - ERR
	log "mosquitto pid $(<"$run/mosquitto.pid"), run dir $run"

	local self
	self=$(readlink -f "${BASH_SOURCE[0]}")
	printf 'export SCOOTGATE_MOSQUITTO_ADDR=127.0.0.1:%s\n' "$MOSQUITTO_PORT"
	printf 'export SCOOTGATE_CI_MOSQUITTO_DIR=%q\n' "$run"
	printf 'ci_mosquitto_stop() { %q stop %q; }\n' "$self" "$run"
}

case ${1:-start} in
start) start ;;
stop)
	[[ $# == 2 ]] || die "usage: $0 stop DIR"
	stop "$2"
	;;
*) die "usage: $0 [start | stop DIR]" ;;
esac
