#!/usr/bin/env bash
# fleet.sh runs a ScootGate fleet on one machine, all on 127.0.0.1:
#
#   HAProxy :28080 ──► node 1..3 (API :28081-3, health :28181-3)
#                         │  pull snapshots ──► nginx :28090 (control plane: cp/*.json)
#                         │  usage events  ──► Mosquitto :21883
#                         └─ providers     ──► tinyproxy :28888 (CONNECT) ──► provider
#
#   deploy/fleet/fleet.sh up         build bin/scootgate, write the run directory, start everything
#   deploy/fleet/fleet.sh status     each node's /readyz, HAProxy's view
#   deploy/fleet/fleet.sh publish routes|authz FILE
#                                    check FILE against the current document, then publish it
#                                    (write beside, rename over: readers never see half a file)
#   deploy/fleet/fleet.sh drain N    SIGTERM node N: it leaves HAProxy's rotation, finishes, exits
#   deploy/fleet/fleet.sh start N    start node N again
#   deploy/fleet/fleet.sh down       stop everything (by the PIDs it recorded)
#
# Needs go, mosquitto, haproxy, nginx, tinyproxy and curl (Debian/Ubuntu:
# apt-get install mosquitto haproxy nginx-light tinyproxy curl). Run it from
# the repository root. The provider is OpenAI unless you point it elsewhere:
#
#   PROVIDER_KEY=sk-...                         the provider's API key (required)
#   PROVIDER_BASE_URL=https://api.openai.com/v1 any OpenAI-compatible API; http:// only on 127.0.0.1
#   PROVIDER_MODEL=gpt-4o-mini                  the provider's model behind the public model "demo"
#   FLEET_DIR=.scootgate-fleet                  the run directory (configs, snapshots, logs, state)
#
# Clients use the demo key sk-fleet-demo (its digest is in cp/authz.json).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
run=${FLEET_DIR:-.scootgate-fleet}
nodes=(1 2 3)
demo_key=sk-fleet-demo

die() { echo "fleet: $*" >&2; exit 1; }

need() {
	local missing=()
	for c in go mosquitto haproxy nginx tinyproxy curl; do
		command -v "$c" >/dev/null || missing+=("$c")
	done
	((${#missing[@]} == 0)) || die "missing: ${missing[*]} (Debian/Ubuntu: apt-get install mosquitto haproxy nginx-light tinyproxy curl)"
}

# start NAME CMD...: run CMD in the background, logging to $run/NAME.log,
# and record its PID in $run/NAME.pid.
start() {
	local name=$1
	shift
	if [[ -f $run/$name.pid ]] && kill -0 "$(cat "$run/$name.pid")" 2>/dev/null; then
		echo "fleet: $name already runs (pid $(cat "$run/$name.pid"))"
		return
	fi
	"$@" >"$run/$name.log" 2>&1 &
	echo $! >"$run/$name.pid"
}

# stop NAME: SIGTERM the recorded PID and wait for it (up to 40 s: a node drains).
stop() {
	local f=$run/$1.pid pid
	[[ -f $f ]] || return 0
	pid=$(cat "$f")
	if kill -TERM "$pid" 2>/dev/null; then
		for _ in $(seq 400); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
	fi
	rm -f "$f"
}

# wait_ok URL SECONDS: until URL answers 200.
wait_ok() {
	for _ in $(seq $(($2 * 10))); do
		[[ $(curl -s -o /dev/null -w '%{http_code}' "$1" || true) == 200 ]] && return 0
		sleep 0.1
	done
	return 1
}

snapshots() {
	local now digest
	now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
	digest=$(printf '%s' "$demo_key" | "$run/bin/scootgate" digest)
	cat >"$run/cp/.authz.json.tmp" <<-EOF
	{"schema": 1, "version": 1, "generated_at": "$now",
	 "keys": [{"key_id": "demo", "tenant_id": "demo-tenant", "digest": "$digest"}]}
	EOF
	cat >"$run/cp/.routes.json.tmp" <<-EOF
	{"schema": 1, "version": 1, "generated_at": "$now",
	 "backends": [{"id": "provider", "protocol": "openai", "base_url": "$PROVIDER_BASE_URL",
	               "credential": "provider", "max_inflight_per_node": 256}],
	 "models": [{"name": "demo", "targets": [{"backend": "provider", "model": "$PROVIDER_MODEL",
	             "weight": 1, "stream": true, "tools": true}]}]}
	EOF
	"$run/bin/scootgate" check --authz "$run/cp/.authz.json.tmp" >/dev/null
	"$run/bin/scootgate" check --routes "$run/cp/.routes.json.tmp" --config "$run/node-1.toml" >/dev/null
	mv "$run/cp/.authz.json.tmp" "$run/cp/authz.json"
	mv "$run/cp/.routes.json.tmp" "$run/cp/routes.json"
}

start_node() {
	local n=$1
	PROVIDER_KEY=$PROVIDER_KEY start "node-$n" "$run/bin/scootgate" run --config "$run/node-$n.toml"
}

up() {
	need
	: "${PROVIDER_KEY:?set PROVIDER_KEY to the provider API key}"
	PROVIDER_BASE_URL=${PROVIDER_BASE_URL:-https://api.openai.com/v1}
	PROVIDER_MODEL=${PROVIDER_MODEL:-gpt-4o-mini}
	mkdir -p "$run/bin" "$run/cp" "$run/tmp"
	go build -o "$run/bin/scootgate" ./cmd/scootgate
	# The provider key may only be sent to PROVIDER_BASE_URL's host.
	[[ $PROVIDER_BASE_URL =~ ^https?://([^/:]+|\[[^]/]+\]) ]] || die "PROVIDER_BASE_URL: expected http(s)://host..."
	provider_host=${BASH_REMATCH[1]}
	for n in "${nodes[@]}"; do
		mkdir -p "$run/node-$n"
		sed -e "s/@N@/$n/g" -e "s/@PROVIDER_HOST@/$provider_host/g" "$here/node.toml.in" >"$run/node-$n.toml"
	done
	[[ -f $run/cp/routes.json ]] || snapshots
	cp "$here/haproxy.cfg" "$here/nginx.conf" "$here/mosquitto.conf" "$here/tinyproxy.conf" "$run/"
	# A local provider over plaintext needs its port opened for CONNECT.
	if [[ $PROVIDER_BASE_URL =~ ^http://127\.0\.0\.1:([0-9]+) ]]; then
		echo "ConnectPort ${BASH_REMATCH[1]}" >>"$run/tinyproxy.conf"
	fi
	for n in "${nodes[@]}"; do
		"$run/bin/scootgate" check --offline --config "$run/node-$n.toml" >/dev/null
	done

	start mosquitto mosquitto -c "$run/mosquitto.conf"
	start nginx nginx -p "$(cd "$run" && pwd)" -c nginx.conf
	start tinyproxy tinyproxy -d -c "$run/tinyproxy.conf"
	wait_ok http://127.0.0.1:28090/authz.json 10 || die "the control plane (nginx) did not come up: $run/nginx.log"
	for n in "${nodes[@]}"; do start_node "$n"; done
	for n in "${nodes[@]}"; do
		wait_ok "http://127.0.0.1:2818$n/readyz" 30 || die "node $n is not ready: $run/node-$n.log"
	done
	start haproxy haproxy -f "$run/haproxy.cfg"
	cat <<-EOF
	fleet is up ($run). Try:

	  curl -s http://127.0.0.1:28080/v1/chat/completions -H 'Authorization: Bearer $demo_key' \\
	    -H 'Content-Type: application/json' -d '{"model":"demo","messages":[{"role":"user","content":"hi"}]}'
	  mosquitto_sub -h 127.0.0.1 -p 21883 -q 1 -t '\$share/billing/scootgate/usage'
	  $0 status | drain 2 | start 2 | publish authz FILE | down
	EOF
}

status() {
	for n in "${nodes[@]}"; do
		printf 'node %s: ' "$n"
		curl -s "http://127.0.0.1:2818$n/readyz" || echo down
	done
}

publish() {
	local kind=$1 file=$2
	[[ $kind == routes || $kind == authz ]] || die "publish routes|authz FILE"
	local cfg=()
	[[ $kind == routes ]] && cfg=(--config "$run/node-1.toml") # the node's credentials and their hosts
	"$run/bin/scootgate" check "--$kind" "$file" --previous "$run/cp/$kind.json" "${cfg[@]}"
	cp "$file" "$run/cp/.$kind.json.tmp"
	mv "$run/cp/.$kind.json.tmp" "$run/cp/$kind.json"
	echo "published; nodes apply it within poll_interval (2 s)"
}

down() {
	stop haproxy
	for n in "${nodes[@]}"; do stop "node-$n" & done
	wait
	stop tinyproxy
	stop nginx
	stop mosquitto
}

case ${1:-} in
up) up ;;
status) status ;;
publish) publish "${2:?publish routes|authz FILE}" "${3:?publish routes|authz FILE}" ;;
drain) stop "node-${2:?drain N}" ;;
start)
	: "${PROVIDER_KEY:?set PROVIDER_KEY}"
	start_node "${2:?start N}"
	;;
down) down ;;
*) sed -n '2,30p' "$0" >&2; exit 2 ;;
esac
