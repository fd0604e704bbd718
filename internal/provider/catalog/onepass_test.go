package catalog_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/jsonedit"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/provider/anthropic"
	"github.com/scootgate/scootgate/internal/provider/converse"
	"github.com/scootgate/scootgate/internal/provider/gemini"
	"github.com/scootgate/scootgate/internal/provider/openai"
	"github.com/scootgate/scootgate/internal/sse"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// The two-pass usage readers the one-pass ones replaced, kept as their
// definition: jsonedit.Lookup finds the usage object, then the normalizer
// walks it again (provider.Lookup4, provider.Inner).

func twoPassBody(body []byte, key string, normalize func([]byte) usageevent.Usage) (usageevent.Usage, json.RawMessage, bool) {
	raw, ok, err := jsonedit.Lookup(body, key)
	if err != nil || !ok || !provider.Usable(raw) {
		return usageevent.Usage{}, nil, false
	}
	return normalize(raw), bytes.Clone(raw), true
}

func twoPassOpenAI(obj []byte, keys [4]string) usageevent.Usage {
	v := provider.Lookup4(obj, keys)
	return provider.Clamp(usageevent.Usage{
		InputTokens:     provider.Count(v[0]),
		OutputTokens:    provider.Count(v[1]),
		CacheReadTokens: provider.Inner(v[2], "cached_tokens"),
		ReasoningTokens: provider.Inner(v[3], "reasoning_tokens"),
	})
}

func twoPassChat(obj []byte) usageevent.Usage {
	return twoPassOpenAI(obj, [4]string{"prompt_tokens", "completion_tokens", "prompt_tokens_details", "completion_tokens_details"})
}

func twoPassResponses(obj []byte) usageevent.Usage {
	return twoPassOpenAI(obj, [4]string{"input_tokens", "output_tokens", "input_tokens_details", "output_tokens_details"})
}

func twoPassCacheSum(obj []byte, keys [4]string) usageevent.Usage {
	v := provider.Lookup4(obj, keys)
	in, write, read := provider.Count(v[0]), provider.Count(v[1]), provider.Count(v[2])
	return provider.Clamp(usageevent.Usage{
		InputTokens:      provider.AddSat(provider.AddSat(in, write), read),
		OutputTokens:     provider.Count(v[3]),
		CacheReadTokens:  read,
		CacheWriteTokens: write,
	})
}

func twoPassAnthropic(obj []byte) usageevent.Usage {
	return twoPassCacheSum(obj, [4]string{"input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens"})
}

func twoPassConverse(obj []byte) usageevent.Usage {
	return twoPassCacheSum(obj, [4]string{"inputTokens", "cacheWriteInputTokens", "cacheReadInputTokens", "outputTokens"})
}

func twoPassGemini(obj []byte) usageevent.Usage {
	v := provider.Lookup4(obj, [4]string{"promptTokenCount", "candidatesTokenCount", "cachedContentTokenCount", "thoughtsTokenCount"})
	tool := provider.Inner(obj, "toolUsePromptTokenCount")
	thoughts := provider.Count(v[3])
	return provider.Clamp(usageevent.Usage{
		InputTokens:     provider.AddSat(provider.Count(v[0]), tool),
		OutputTokens:    provider.AddSat(provider.Count(v[1]), thoughts),
		CacheReadTokens: provider.Count(v[2]),
		ReasoningTokens: thoughts,
	})
}

// twoPassGeminiBody is gemini.BodyUsage's definition: the object's
// usageMetadata, or the last one of an array of chunks.
func twoPassGeminiBody(body []byte) (usageevent.Usage, json.RawMessage, bool) {
	b := bytes.TrimLeft(body, " \t\r\n")
	if len(b) == 0 || b[0] != '[' {
		return twoPassBody(body, "usageMetadata", twoPassGemini)
	}
	it, err := jsonedit.Elements(body)
	if err != nil {
		return usageevent.Usage{}, nil, false
	}
	var last []byte
	for {
		el, _, ok, err := it.Next()
		if err != nil {
			return usageevent.Usage{}, nil, false
		}
		if !ok {
			break
		}
		if raw, ok, err := jsonedit.Lookup(el, "usageMetadata"); err == nil && ok && provider.Usable(raw) {
			last = raw
		}
	}
	if last == nil {
		return usageevent.Usage{}, nil, false
	}
	return twoPassGemini(last), bytes.Clone(last), true
}

// filtered is a stream tracker's byte filter in front of its two-pass
// read: no usage when the filter says none.
func filtered(pass bool, r usageResult) usageResult {
	if !pass {
		return usageResult{}
	}
	return r
}

var (
	usageKey         = provider.NewKey("usage")
	usageMetadataKey = provider.NewKey("usageMetadata")
)

type usageResult struct {
	Usage usageevent.Usage
	Raw   string
	OK    bool
}

func result(u usageevent.Usage, raw json.RawMessage, ok bool) usageResult {
	return usageResult{u, string(raw), ok}
}

// observed is what a stream tracker reports after one event carrying
// data.
func observed(data []byte, observe func(*sse.Event) bool, usage func() (usageevent.Usage, json.RawMessage, bool)) usageResult {
	observe(&sse.Event{Data: data})
	return result(usage())
}

// FuzzUsageOnePass holds every one-pass usage reader to the two-pass
// definition it replaced, on arbitrary bodies: the counts, the raw copy
// and whether there is usage at all.
func FuzzUsageOnePass(f *testing.F) {
	for _, s := range []string{
		`{"id":"x","usage":{"prompt_tokens":19,"completion_tokens":196,"total_tokens":215,"prompt_tokens_details":{"cached_tokens":3,"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":5}}}`,
		`{"usage":{"input_tokens":5,"output_tokens":6,"input_tokens_details":{"cached_tokens":2},"output_tokens_details":7},"usage":{"input_tokens":8}}`,
		`{"usage":{"input_tokens":1},"usage":null}`,
		`{"us\u0061ge":{"inp\u0075t_tokens":9,"INPUT_TOKENS":1,"output_tokens":2.0,"cache_read_input_tokens":-1}}`,
		`{"usage":{"inputTokens":1,"cacheWriteInputTokens":2,"cacheReadInputTokens":3,"outputTokens":4}}`,
		`{"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":2,"cachedContentTokenCount":3,"thoughtsTokenCount":4,"toolUsePromptTokenCount":5}}`,
		`[{"usageMetadata":{"promptTokenCount":1}},{"x":1},{"usageMetadata":{"promptTokenCount":2}}]`,
		`{"usage":{"prompt_tokens_details":{"cached_tokens":1}},"x":}`,
		`{"usage":{"prompt_tokens_details":{"cached_tokens":1}}} x`,
		`{"usage":{"prompt_tokens_details":[{"cached_tokens":1}]}}`,
		` { "usage" : { "prompt_tokens" : 1e3 , "completion_tokens" : "2" } } `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, tc := range []struct {
			name      string
			got, want usageResult
		}{
			{"chat", result(openai.ChatBodyUsage(body)), result(twoPassBody(body, "usage", twoPassChat))},
			{"responses", result(openai.ResponsesBodyUsage(body)), result(twoPassBody(body, "usage", twoPassResponses))},
			{"anthropic", result(anthropic.BodyUsage(body)), result(twoPassBody(body, "usage", twoPassAnthropic))},
			{"converse", result(converse.BodyUsage(body)), result(twoPassBody(body, "usage", twoPassConverse))},
			{"gemini", result(gemini.BodyUsage(body)), result(twoPassGeminiBody(body))},
			{
				"chat stream",
				func() usageResult { s := openai.NewChatStream(false); return observed(body, s.Observe, s.Usage) }(),
				filtered(provider.MayHaveMember(body, usageKey), result(twoPassBody(body, "usage", twoPassChat))),
			},
			{
				"transcript stream",
				func() usageResult { var s openai.TranscriptStream; return observed(body, s.Observe, s.Usage) }(),
				filtered(provider.MayHaveMember(body, usageKey), result(twoPassBody(body, "usage", twoPassResponses))),
			},
			{
				"gemini stream",
				func() usageResult { s := gemini.NewStream(); return observed(body, s.Observe, s.Usage) }(),
				filtered(provider.MayHaveValue(body, usageMetadataKey), result(twoPassBody(body, "usageMetadata", twoPassGemini))),
			},
		} {
			if diff := cmp.Diff(tc.want, tc.got); diff != "" {
				t.Fatalf("%s %q: one pass differs from two (-two +one):\n%s", tc.name, body, diff)
			}
		}
		// A Responses stream's usage is in its "response" object.
		if resp, ok, err := jsonedit.Lookup(body, "response"); err == nil && ok && provider.Object(resp) {
			s := openai.NewResponsesStream()
			got := observed(body, s.Observe, s.Usage)
			want := filtered(provider.MayHaveValue(body, usageKey), result(twoPassBody(resp, "usage", twoPassResponses)))
			if !cmp.Equal(want, got) {
				t.Fatalf("responses stream %q: one pass differs from two (-two +one):\n%s", body, cmp.Diff(want, got))
			}
		}
	})
}
