#!/usr/bin/env bash
# ci-agents.sh installs the coding agents that the end-to-end tests run
# through a real node (they skip loudly without them, and fail when
# SCOOTGATE_REQUIRE_DAEMONS=1):
#
#   gemini (npm @google/gemini-cli)   TestGeminiCLI (internal/app): `gemini -p`
#                                     with GOOGLE_GEMINI_BASE_URL and
#                                     GEMINI_API_KEY pointed at the node
#
# Usage, as root with Node.js and npm:   scripts/ci-agents.sh
#
# Versions are pinned: an agent's new release is a change to review, not
# something a CI run picks up by itself.
set -euo pipefail

log() { printf 'ci-agents: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

gemini_version=0.61.0
if [[ $(gemini --version 2>/dev/null) == "$gemini_version" ]]; then
	exit 0
fi
command -v npm >/dev/null || die "npm is needed to install @google/gemini-cli"
log "installing @google/gemini-cli@$gemini_version"
npm install -g --no-audit --no-fund "@google/gemini-cli@$gemini_version" >&2
[[ $(gemini --version 2>/dev/null) == "$gemini_version" ]] || die "gemini $gemini_version missing after install"
