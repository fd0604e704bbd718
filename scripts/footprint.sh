#!/usr/bin/env bash
# footprint.sh: which files and packages of the node one streamed chat
# completion runs code in (docs/architecture.md "Footprint").
#
# It builds make run's binary with per-block coverage counters, serves
# 3 + 2 and 3 + 10 streamed chat completions from two fresh starts of the
# same length, and lists the files whose blocks ran at least once more
# per extra request. Start-up, snapshot polls and the warm-up requests
# cancel out; what remains is the per-request path. The dev stack's own parts (fake provider, proxy,
# control plane, broker, and the consumer that prints each usage event)
# are left out, and so is mqttpub: delivery to the broker runs after the
# request, on the outbox's own goroutine. So is the node-load sampler
# (upstream/nodeload.go): it ticks every 100 ms whatever the traffic, and
# how many of its blocks run depends on how late its ticks were.
# Needs make run's ports free (no make run).
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -cover -covermode=count -coverpkg=./... -o "$work/dev" ./cmd/scootgate-dev

run() { # $1: requests after the warm-up
	mkdir -p "$work/cov$1" "$work/home$1"
	(cd "$work/home$1" && GOCOVERDIR="$work/cov$1" exec "$work/dev" >"$work/log$1" 2>&1) &
	local pid=$! start=$SECONDS
	for _ in $(seq 100); do curl -fs -o /dev/null http://127.0.0.1:8081/readyz && break; sleep 0.1; done
	for _ in 1 2 3 $(seq "$1"); do
		curl -fs -o /dev/null http://127.0.0.1:8080/v1/chat/completions \
			-H 'authorization: Bearer sk-scootgate-demo' -H 'content-type: application/json' \
			-d '{"model":"demo-gpt","stream":true,"messages":[{"role":"user","content":"hi"}]}'
	done
	sleep $((start + 10 - SECONDS)) # both runs last as long: polls cancel out
	kill -TERM "$pid"
	wait "$pid" || true
	go tool covdata textfmt -i="$work/cov$1" -o "$work/c$1.out"
}
run 2
run 10
# A block counts when it ran at least 8 more times for 8 more requests.
awk -v skip='^(cmd/|internal/devstack/|internal/mqttpub/|internal/upstream/nodeload.go|pkg/internal/contract/|pkg/usageevent/decode.go)' '
	FNR == 1 { next }
	NR == FNR { before[$1] += $3; next }
	{ after[$1] += $3 }
	END {
		for (b in after) {
			if (after[b] - before[b] < 8) continue
			split(b, f, ":"); file = f[1]
			sub("^github.com/scootgate/scootgate/", "", file)
			if (file ~ skip) continue
			files[file] = 1
		}
		for (file in files) {
			nf++; pkg = file; sub("/[^/]*$", "", pkg)
			if (!(pkg in pkgs)) { pkgs[pkg] = 1; np++ }
			print file
		}
		printf "%d files in %d packages\n", nf, np
	}' "$work/c2.out" "$work/c10.out" | sort
