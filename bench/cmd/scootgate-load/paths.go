package main

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/scootgate/scootgate/bench/internal/loadgen"
)

// apiPath is one client endpoint the harness loads: what clients post,
// and what a complete stream of it looks like. The node routes each to a
// backend of its protocol; the baseline forwards the same path to the
// same fake provider.
type apiPath struct {
	key    string // as in -paths
	label  string // in scenario names and reports
	url    string // the request path
	header http.Header
	format loadgen.Format
	// whole and stream are the request bodies; stream's user message has
	// one word per content event (the fake provider splits its echo into
	// -events pieces).
	whole  string
	stream func(words string) string
}

// Path keys, in report order.
const (
	pathOpenAI    = "openai"
	pathAnthropic = "anthropic"
	pathResponses = "responses"
)

// anthropicVersion is what Anthropic clients send; the node passes it on.
const anthropicVersion = "2023-06-01"

// Requests. Chat completion streams ask for usage themselves
// (stream_options), so the node does not inject it and both systems relay
// the very same events; Messages and Responses streams always carry it.
var apiPaths = map[string]*apiPath{
	pathOpenAI: {
		key: pathOpenAI, label: "chat completions", url: "/v1/chat/completions", format: loadgen.ChatCompletions,
		header: http.Header{"Authorization": {"Bearer " + benchKey}, "Content-Type": {"application/json"}},
		whole: `{"model":"` + benchModel + `","messages":[{"role":"system","content":"be brief"},` +
			`{"role":"user","content":"hello from the load generator"}],"temperature":0.2}`,
		stream: func(words string) string {
			return `{"model":"` + benchModel + `","stream":true,"stream_options":{"include_usage":true},` +
				`"messages":[{"role":"user","content":"` + words + `"}]}`
		},
	},
	pathAnthropic: {
		key: pathAnthropic, label: "messages", url: "/v1/messages", format: loadgen.Messages,
		header: http.Header{"X-Api-Key": {benchKey}, "Anthropic-Version": {anthropicVersion}, "Content-Type": {"application/json"}},
		whole: `{"model":"` + benchClaude + `","max_tokens":256,"system":"be brief",` +
			`"messages":[{"role":"user","content":"hello from the load generator"}],"temperature":0.2}`,
		stream: func(words string) string {
			return `{"model":"` + benchClaude + `","max_tokens":256,"stream":true,` +
				`"messages":[{"role":"user","content":"` + words + `"}]}`
		},
	},
	pathResponses: {
		key: pathResponses, label: "responses", url: "/v1/responses", format: loadgen.Responses,
		header: http.Header{"Authorization": {"Bearer " + benchKey}, "Content-Type": {"application/json"}},
		whole:  `{"model":"` + benchModel + `","store":false,"instructions":"be brief","input":"hello from the load generator","temperature":0.2}`,
		stream: func(words string) string {
			return `{"model":"` + benchModel + `","store":false,"stream":true,"input":"` + words + `"}`
		},
	},
}

var pathOrder = []string{pathOpenAI, pathAnthropic, pathResponses}

// parsePaths reads -paths: known keys, no repeats, in the order given.
func parsePaths(s string) ([]string, error) {
	var out []string
	for part := range strings.SplitSeq(s, ",") {
		key := strings.TrimSpace(part)
		if _, ok := apiPaths[key]; !ok {
			return nil, fmt.Errorf("-paths: unknown path %q (want %s)", key, strings.Join(pathOrder, ", "))
		}
		for _, k := range out {
			if k == key {
				return nil, fmt.Errorf("-paths: %q twice", key)
			}
		}
		out = append(out, key)
	}
	return out, nil
}

func (p *apiPath) wholeRequest(base string) loadgen.Request {
	return loadgen.Request{URL: base + p.url, Header: p.header, Body: []byte(p.whole)}
}

func (p *apiPath) streamRequest(base string, events int) loadgen.Request {
	words := strings.TrimSpace(strings.Repeat("tok ", events))
	return loadgen.Request{URL: base + p.url, Header: p.header, Body: []byte(p.stream(words))}
}
