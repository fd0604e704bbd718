#!/usr/bin/env bash
# ci-agents.sh installs the coding agents that the end-to-end tests run
# through a real node (they skip loudly without them, and fail when
# SCOOTGATE_REQUIRE_DAEMONS=1):
#
#   gemini (npm @google/gemini-cli)   TestGeminiCLI (internal/app): `gemini -p`
#                                     with GOOGLE_GEMINI_BASE_URL and
#                                     GEMINI_API_KEY pointed at the node;
#                                     TestGeminiCLIVertexExpress: the same in
#                                     Vertex AI express mode
#   claude (npm @anthropic-ai/claude-code)
#                                     TestClaudeCodeVertex (internal/app): two
#                                     `claude -p` turns of one session in its
#                                     Vertex mode, ANTHROPIC_VERTEX_BASE_URL
#                                     pointed at the node; TestClaudeCodeBedrock:
#                                     two turns in its Bedrock mode
#                                     (CLAUDE_CODE_USE_BEDROCK,
#                                     ANTHROPIC_BEDROCK_BASE_URL,
#                                     AWS_BEARER_TOKEN_BEDROCK) against the node
#   openai (npm, the Node SDK) in     TestAudioTranscriptionNodeSDK (internal/app):
#   /opt/scootgate-node               a multipart upload as the Node SDK builds it
#
# Usage, as root with Node.js and npm:   scripts/ci-agents.sh
#
# Versions are pinned: an agent's new release is a change to review, not
# something a CI run picks up by itself.
set -euo pipefail

log() { printf 'ci-agents: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

gemini_version=0.61.0
claude_version=2.1.328
node_openai_version=7.59.0
node_prefix=/opt/scootgate-node

command -v npm >/dev/null || die "npm is needed to install the agents"
if [[ $(gemini --version 2>/dev/null) != "$gemini_version" ]]; then
	log "installing @google/gemini-cli@$gemini_version"
	npm install -g --no-audit --no-fund "@google/gemini-cli@$gemini_version" >&2
	[[ $(gemini --version 2>/dev/null) == "$gemini_version" ]] || die "gemini $gemini_version missing after install"
fi
# The package's optional dependency for the platform carries the native
# binary; its wrapper runs it, with or without the postinstall step.
if [[ $(claude --version 2>/dev/null) != "$claude_version (Claude Code)" ]]; then
	log "installing @anthropic-ai/claude-code@$claude_version"
	npm install -g --no-audit --no-fund "@anthropic-ai/claude-code@$claude_version" >&2
	[[ $(claude --version 2>/dev/null) == "$claude_version (Claude Code)" ]] || die "claude $claude_version missing after install"
fi
installed=$(node -p "require('$node_prefix/node_modules/openai/package.json').version" 2>/dev/null || true)
if [[ $installed != "$node_openai_version" ]]; then
	log "installing the openai Node SDK $node_openai_version into $node_prefix"
	npm install --prefix "$node_prefix" --no-audit --no-fund "openai@$node_openai_version" >&2
fi
