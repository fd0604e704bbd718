#!/usr/bin/env bash
# ci-tools.sh installs the Debian tools that the operations tests run (they
# skip loudly without them, and fail when SCOOTGATE_REQUIRE_DAEMONS=1):
#
#   promtool (package prometheus)  `promtool check metrics` over a real node's
#                                  exposition (internal/app), `promtool check
#                                  rules` and `promtool test rules` over
#                                  deploy/prometheus (deploy)
#   haproxy                        the load-balancer example in front of two
#                                  real nodes while one drains (internal/app)
#   systemd-analyze, systemd-sysusers (package systemd)
#                                  `systemd-analyze security --offline` of the
#                                  unit and its sysusers.d file (deploy)
#   redis-server                   the redis store of per-key and per-tenant
#                                  limits: the tests start their own servers
#                                  on free loopback ports (internal/limits,
#                                  internal/app), and Redis Sentinels from
#                                  deploy/redis with `redis-server --sentinel`
#                                  (the same package: no other binary)
#
# Usage, as root on Debian 12:   scripts/ci-tools.sh
#
# Nothing is started: no package service may run (the prometheus package
# would start a server on :9090, redis-server one on :6379). Without an
# /usr/sbin/policy-rc.d the script puts one in place for the install and removes it after.
set -euo pipefail

log() { printf 'ci-tools: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

missing=()
command -v promtool >/dev/null || missing+=(prometheus)
command -v haproxy >/dev/null || [[ -x /usr/sbin/haproxy ]] || missing+=(haproxy)
command -v systemd-analyze >/dev/null && command -v systemd-sysusers >/dev/null || missing+=(systemd)
command -v redis-server >/dev/null || missing+=(redis-server)
if ((${#missing[@]} == 0)); then
	exit 0
fi
[[ $(id -u) == 0 ]] || die "must run as root to install ${missing[*]}"
[[ -r /etc/debian_version ]] || die "needs Debian (apt-get) to install ${missing[*]}"

policy=/usr/sbin/policy-rc.d
own_policy=0
if [[ ! -e $policy ]]; then
	printf '#!/bin/sh\nexit 101\n' >"$policy"
	chmod 755 "$policy"
	own_policy=1
fi
cleanup() { if ((own_policy)); then rm -f "$policy"; fi; }
trap cleanup EXIT

log "installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
command -v promtool >/dev/null || die "promtool missing after installing prometheus"
command -v redis-server >/dev/null || die "redis-server missing after installing redis-server"
