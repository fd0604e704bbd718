#!/usr/bin/env bash
# Runs every fuzz target of the module for FUZZTIME each (make fuzz).
#
# Each new input that widens coverage is minimised, by default for up to
# 60 s: a target that keeps finding new inputs then spends its whole budget
# minimising and runs a handful of inputs (FuzzDecodeValidate once ran 16
# in 45 s). -fuzzminimizetime bounds each minimisation to FUZZMINIMIZE
# (default 100 runs of the target), and a target that ran fewer than
# FUZZMINEXECS inputs fails the run, so a starved target is visible
# instead of passing quietly.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-10s}
FUZZMINIMIZE=${FUZZMINIMIZE:-100x}
FUZZMINEXECS=${FUZZMINEXECS:-1000}

targets=0
starved=()
for pkg in $($GO list ./...); do
	for f in $($GO test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
		targets=$((targets + 1))
		echo "== $pkg $f"
		out=$($GO test -run='^$' -fuzz="^$f\$" -fuzztime="$FUZZTIME" -fuzzminimizetime="$FUZZMINIMIZE" "$pkg" 2>&1) || {
			echo "$out"
			exit 1
		}
		last=$(grep -E 'execs: [0-9]+' <<<"$out" | tail -n 1 || true)
		echo "   ${last:-no progress line}"
		execs=$(sed -nE 's/.*execs: ([0-9]+).*/\1/p' <<<"$last")
		if [ -z "$execs" ] || [ "$execs" -lt "$FUZZMINEXECS" ]; then
			starved+=("$pkg $f: ${execs:-0} inputs")
		fi
	done
done
echo "fuzz: $targets targets, $FUZZTIME each"
if [ "$targets" -eq 0 ]; then
	echo "fuzz: no fuzz targets found" >&2
	exit 1
fi
if [ "${#starved[@]}" -gt 0 ]; then
	printf 'fuzz: target ran fewer than %s inputs: %s\n' "$FUZZMINEXECS" "${starved[@]}" >&2
	exit 1
fi
