package anthropic

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/provider"
)

// TestVertexURL: Google's own host per location (global has none in its
// name), the project and location under /v1, the model one segment.
func TestVertexURL(t *testing.T) {
	tests := []struct {
		name, location, model string
		stream                bool
		want                  string
	}{
		{"regional", "us-east5", "claude-sonnet-4-5@20250929", false,
			"https://us-east5-aiplatform.googleapis.com/v1/projects/my-project/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict"},
		{"global, stream", "global", "claude-opus-4-1@20250805", true,
			"https://aiplatform.googleapis.com/v1/projects/my-project/locations/global/publishers/anthropic/models/claude-opus-4-1@20250805:streamRawPredict"},
		{"escaped", "europe-west1", "a b/c", false,
			"https://europe-west1-aiplatform.googleapis.com/v1/projects/my-project/locations/europe-west1/publishers/anthropic/models/a%20b%2Fc:rawPredict"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base, err := url.Parse(provider.VertexBaseURL(tt.location))
			if err != nil {
				t.Fatal(err)
			}
			u, err := vertexURL(provider.VertexResource(base, "my-project", tt.location), tt.model, tt.stream)
			if err != nil {
				t.Fatal(err)
			}
			if got := u.String(); got != tt.want {
				t.Errorf("URL = %s, want %s", got, tt.want)
			}
		})
	}
	// A base_url with a path (a fake, a private endpoint) keeps it.
	base, _ := url.Parse("http://127.0.0.1:8080/vertex/")
	u, _ := vertexURL(provider.VertexResource(base, "p-123456", "us-east5"), "m", false)
	if want := "http://127.0.0.1:8080/vertex/v1/projects/p-123456/locations/us-east5/publishers/anthropic/models/m:rawPredict"; u.String() != want {
		t.Errorf("URL = %s, want %s", u, want)
	}
	if _, err := vertexURL(base, "", false); err == nil {
		t.Error("empty model: no error")
	}
}

// TestVertexBody: the model member becomes anthropic_version in place;
// every other byte is the client's, and betas stay headers.
func TestVertexBody(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"first member", `{"model":"claude","max_tokens":5,"messages":[]}`,
			`{"anthropic_version":"vertex-2023-10-16","max_tokens":5,"messages":[]}`},
		{"last member, spaces kept", "{ \"max_tokens\" : 5,\n  \"messages\": [] ,\n  \"model\"  :\t\"claude\"\n}",
			"{ \"max_tokens\" : 5,\n  \"messages\": [] ,\n  \"anthropic_version\":\"vertex-2023-10-16\"\n}"},
		{"escaped name", `{"max_tokens":5,"mod\u0065l":"claude","messages":[{"role":"user","content":"model"}]}`,
			`{"max_tokens":5,"anthropic_version":"vertex-2023-10-16","messages":[{"role":"user","content":"model"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, berr := inspectMessages([]byte(tt.body), "")
			if berr != nil {
				t.Fatal(berr)
			}
			var p provider.Pieces
			if err := vertexBody(&r, []byte(tt.body), http.Header{"Anthropic-Beta": {"x"}}, &p); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(bytes.Join(p.Parts(), nil)), tt.want); diff != "" {
				t.Errorf("body (-got +want):\n%s", diff)
			}
			if p.Len() != len(tt.want) {
				t.Errorf("Len = %d, want %d", p.Len(), len(tt.want))
			}
		})
	}
}

func TestVertexHeader(t *testing.T) {
	h := Header(http.Header{"Anthropic-Beta": {"x"}, "Anthropic-Version": {"2023-06-01"}}, "key")
	vertexHeader(h, "tok")
	want := http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer tok"}, "Anthropic-Beta": {"x"}}
	if diff := cmp.Diff(h, want); diff != "" {
		t.Errorf("headers (-got +want):\n%s", diff)
	}
}

// TestVertexAnswer: Google's error shape becomes Anthropic's with the same
// status; Anthropic's own documents and successes pass unchanged.
func TestVertexAnswer(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   string
	}{
		{"quota", 429, `{"error":{"code":429,"message":"Quota exceeded for aiplatform.googleapis.com/online_prediction_requests_per_base_model","status":"RESOURCE_EXHAUSTED"}}`,
			`{"type":"error","error":{"type":"rate_limit_error","message":"Quota exceeded for aiplatform.googleapis.com/online_prediction_requests_per_base_model"}}`},
		{"array", 403, `[{"error":{"code":403,"message":"Permission 'aiplatform.endpoints.predict' denied","status":"PERMISSION_DENIED"}}]`,
			`{"type":"error","error":{"type":"permission_error","message":"Permission 'aiplatform.endpoints.predict' denied"}}`},
		{"unauthenticated", 401, `{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}`,
			`{"type":"error","error":{"type":"authentication_error","message":"Request had invalid authentication credentials."}}`},
		{"anthropic's own", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long"}}`,
			`{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long"}}`},
		{"not json", 502, `Bad Gateway`, `Bad Gateway`},
		{"success", 200, `{"type":"message"}`, `{"type":"message"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: tt.status, Header: http.Header{}}
			got, err := io.ReadAll(vertexAnswer(resp, strings.NewReader(tt.body)))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("answer = %s, want %s", got, tt.want)
			}
		})
	}
}
