package catalog_test

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scootgate/scootgate/internal/jsonedit"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/provider/anthropic"
	"github.com/scootgate/scootgate/internal/provider/openai"
	"github.com/scootgate/scootgate/internal/sse"
)

// FuzzObserve feeds arbitrary events to both trackers, after a valid
// message_start so that Anthropic merges are exercised too. Neither may
// panic, every usage they report must make a valid event, and the OpenAI
// prefilter must not miss a usage object.
func FuzzObserve(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "*.sse"))
	for _, p := range paths {
		for _, ev := range readEvents(f, p) {
			f.Add(ev.Type, bytes.Clone(ev.Data))
		}
	}
	f.Add("message_delta", []byte(`{"usage":{"output_tokens":1e400,"input_tokens":null,"\ud800":1}}`))
	f.Add("", []byte(`{"usage":null,"x":{"usage" :{}},"us\u0061ge":{"prompt_tokens":1}}`))

	f.Fuzz(func(t *testing.T, typ string, data []byte) {
		ev := sse.Event{Type: typ, Data: data}
		orig := bytes.Clone(data)

		o := openai.NewChatStream(true)
		hid := o.Observe(&ev)
		nu, raw, ok := o.Usage()
		if hid && !ok {
			t.Fatalf("hid an event without usage: %q", data)
		}
		want, found := usableUsage(data)
		if !bytes.Contains(data, []byte(`\`)) && ok != found {
			// Without escapes a key is spelled literally, so the
			// prefilter sees every usage key.
			t.Fatalf("usage recorded = %v, but jsonedit finds a usage object = %v in %q", ok, found, data)
		}
		if ok && !bytes.Equal(raw, want) {
			t.Fatalf("raw = %q, want the provider's bytes %q", raw, want)
		}
		if ok {
			if err := eventWith(nu, raw).Validate(); err != nil {
				t.Fatalf("OpenAI usage of %q makes an invalid event: %v", data, err)
			}
		}

		a := anthropic.NewStream()
		start := sse.Event{Type: "message_start", Data: []byte(`{"type":"message_start","message":{"usage":{"input_tokens":5,"cache_read_input_tokens":2,"output_tokens":1}}}`)}
		a.Observe(&start)
		if a.Observe(&ev) {
			t.Fatal("an Anthropic event was hidden")
		}
		nu, raw, ok = a.Usage()
		if !ok || !json.Valid(raw) || raw[0] != '{' || len(raw) > provider.MaxRawUsageBytes {
			t.Fatalf("Anthropic usage after %q: %q, %v", data, raw, ok)
		}
		if err := eventWith(nu, raw).Validate(); err != nil {
			t.Fatalf("Anthropic usage after %q makes an invalid event: %v", data, err)
		}
		if !bytes.Equal(data, orig) {
			t.Fatal("Observe modified the event")
		}

		// As a message_delta, data merges exactly as the merge through
		// encoding/json's decoder did.
		a = anthropic.NewStream()
		a.Observe(&start)
		a.Observe(&sse.Event{Type: "message_delta", Data: data})
		_, raw, _ = a.Usage()
		want = []byte(`{"input_tokens":5,"cache_read_input_tokens":2,"output_tokens":1}`)
		if delta, ok, err := jsonedit.Lookup(data, "usage"); err == nil && ok {
			want = decoderMerge(want, delta)
		}
		if !bytes.Equal(raw, want) {
			t.Fatalf("merge of %q = %q, the decoder's merge %q", data, raw, want)
		}
	})
}

// decoderMerge is the Anthropic usage merge as it was written with
// encoding/json's Decoder: the reference for the merge over
// jsonedit.Members.
func decoderMerge(base, raw []byte) []byte {
	if len(raw) == 0 || raw[0] != '{' || len(raw) > provider.MaxRawUsageBytes {
		return base
	}
	merged := base
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return base
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return base
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return base
		}
		_, exists, err := jsonedit.Lookup(merged, key)
		switch {
		case err != nil:
			return base
		case exists && string(v) == "null":
			continue
		case exists:
			merged, _, err = jsonedit.Replace(merged, key, v)
		default:
			merged, err = jsonedit.Insert(merged, key, v)
		}
		if err != nil || len(merged) > provider.MaxRawUsageBytes {
			return base
		}
	}
	return merged
}

// usableUsage returns the top-level usage object of an OpenAI chunk that a
// tracker should keep, found by jsonedit alone.
func usableUsage(data []byte) ([]byte, bool) {
	raw, ok, err := jsonedit.Lookup(data, "usage")
	if err != nil || !ok || !strings.HasPrefix(string(raw), "{") || len(raw) > provider.MaxRawUsageBytes {
		return nil, false
	}
	return raw, true
}
