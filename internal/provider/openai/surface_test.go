package openai

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/provider"
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
