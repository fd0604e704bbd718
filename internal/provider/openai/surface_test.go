package openai

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/sse"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// inspected is what a test compares of an Inspect result: the model, the
// stream flag, the needed capabilities, the body of one attempt (model
// rewritten to "p", usage asked for) and the refusal's code.
type inspected struct {
	Model  string
	Stream bool
	Need   string
	Body   string
	Code   string
}

func inspectOne(spec *provider.Spec, body string) inspected {
	r, berr := spec.Inspect([]byte(body), "")
	if berr != nil {
		return inspected{Code: berr.Code}
	}
	model := []byte(`"p"`)
	return inspected{Model: r.Model, Stream: r.Stream, Need: r.Need.String(),
		Body: string(r.Rewrite([]byte(body), model, nil, true))}
}

func TestInspectCompletions(t *testing.T) {
	tests := []struct {
		name, in string
		want     inspected
	}{
		{"whole", `{"model":"m","prompt":"def f(","suffix":")"}`,
			inspected{Model: "m", Body: `{"model":"p","prompt":"def f(","suffix":")"}`}},
		{"stream asks for usage", `{"model":"m","prompt":"x","stream":true}`,
			inspected{Model: "m", Stream: true, Need: "stream", Body: `{"model":"p","prompt":"x","stream":true,"stream_options":{"include_usage":true}}`}},
		{"stream that asked", `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`,
			inspected{Model: "m", Stream: true, Need: "stream", Body: `{"model":"p","stream":true,"stream_options":{"include_usage":true}}`}},
		{"twin stream", `{"model":"m","stream":true,"Stream":false}`, inspected{Code: "ambiguous_member"}},
		{"no model", `{"prompt":"x"}`, inspected{Code: "missing_model"}},
		{"bad stream_options", `{"model":"m","stream":true,"stream_options":1}`, inspected{Code: "invalid_stream_options"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(inspectOne(Completions, tt.in), tt.want); diff != "" {
				t.Errorf("(-got +want)\n%s", diff)
			}
		})
	}
}

func TestRerankBodyUsage(t *testing.T) {
	tests := []struct {
		name, body string
		want       usageevent.Usage
		raw        string // "" = no usage
	}{
		{"jina", `{"model":"m","results":[],"usage":{"total_tokens":12}}`, usageevent.Usage{InputTokens: 12}, `{"total_tokens":12}`},
		{"prompt tokens first", `{"usage":{"prompt_tokens":10,"total_tokens":12}}`, usageevent.Usage{InputTokens: 10}, `{"prompt_tokens":10,"total_tokens":12}`},
		{"cohere", `{"id":"x","results":[],"meta":{"api_version":{"version":"2"},"billed_units":{"search_units":1,"input_tokens":40}}}`,
			usageevent.Usage{InputTokens: 40}, `{"search_units":1,"input_tokens":40}`},
		{"cohere search units only", `{"meta":{"billed_units":{"search_units":2}}}`, usageevent.Usage{}, `{"search_units":2}`},
		{"usage wins over meta", `{"meta":{"billed_units":{"input_tokens":1}},"usage":{"total_tokens":3}}`, usageevent.Usage{InputTokens: 3}, `{"total_tokens":3}`},
		{"none", `{"results":[]}`, usageevent.Usage{}, ""},
		{"meta without billed units", `{"meta":{"api_version":{}}}`, usageevent.Usage{}, ""},
		{"not json", `nope`, usageevent.Usage{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, raw, ok := RerankBodyUsage([]byte(tt.body))
			if ok != (tt.raw != "") || string(raw) != tt.raw {
				t.Fatalf("raw %s, ok %v; want %s", raw, ok, tt.raw)
			}
			if diff := cmp.Diff(u, tt.want); diff != "" {
				t.Errorf("(-got +want)\n%s", diff)
			}
		})
	}
}

func TestInspectImages(t *testing.T) {
	tests := []struct {
		name, in string
		want     inspected
	}{
		{"whole", `{"model":"m","prompt":"a cat","n":2}`, inspected{Model: "m", Body: `{"model":"p","prompt":"a cat","n":2}`}},
		{"stream", `{"model":"m","prompt":"a cat","stream":true,"partial_images":2}`,
			inspected{Model: "m", Stream: true, Need: "stream", Body: `{"model":"p","prompt":"a cat","stream":true,"partial_images":2}`}},
		{"twin stream", `{"model":"m","stream":false,"STREAM":true}`, inspected{Code: "ambiguous_member"}},
		{"stream not a boolean", `{"model":"m","stream":"yes"}`, inspected{Code: "invalid_stream"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(inspectOne(ImageGenerations, tt.in), tt.want); diff != "" {
				t.Errorf("(-got +want)\n%s", diff)
			}
		})
	}
}

func TestTypedTerminal(t *testing.T) {
	tests := []struct {
		data         string
		done, failed bool
	}{
		{`{"type":"transcript.text.delta","delta":"a"}`, false, false},
		{`{"type":"transcript.text.done","text":"a","usage":{}}`, true, false},
		{`[DONE]`, true, false},
		{`{"type":"error","error":{"message":"x"}}`, false, true},
		{`{"error":{"message":"x"}}`, false, true},
		{`{"type":"image_generation.completed"}`, false, false},
	}
	for _, tt := range tests {
		done, failed := transcriptTerminal(&sse.Event{Data: []byte(tt.data)})
		if done != tt.done || failed != tt.failed {
			t.Errorf("%s: done %v failed %v, want %v %v", tt.data, done, failed, tt.done, tt.failed)
		}
	}
	if done, _ := imageStream.Terminal(&sse.Event{Data: []byte(`{"type":"image_edit.completed"}`)}); !done {
		t.Error("image_edit.completed does not end an image stream")
	}
}
