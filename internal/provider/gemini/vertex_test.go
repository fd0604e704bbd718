package gemini

import (
	"bytes"
	"net/http"
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/provider"
)

func TestVertexURL(t *testing.T) {
	tests := []struct {
		env      *provider.Envelope
		location string
		want     string
	}{
		{vertexGenerate, "us-central1", "https://us-central1-aiplatform.googleapis.com/v1/projects/my-project/locations/us-central1/publishers/google/models/gemini-2.5-pro:generateContent"},
		{vertexStream, "global", "https://aiplatform.googleapis.com/v1/projects/my-project/locations/global/publishers/google/models/gemini-2.5-pro:streamGenerateContent"},
		{vertexCountTokens, "europe-west4", "https://europe-west4-aiplatform.googleapis.com/v1/projects/my-project/locations/europe-west4/publishers/google/models/gemini-2.5-pro:countTokens"},
	}
	for _, tt := range tests {
		base, err := url.Parse(provider.VertexBaseURL(tt.location))
		if err != nil {
			t.Fatal(err)
		}
		u, err := tt.env.URL(provider.VertexResource(base, "my-project", tt.location), "gemini-2.5-pro", true)
		if err != nil {
			t.Fatal(err)
		}
		if u.String() != tt.want {
			t.Errorf("URL = %s, want %s", u, tt.want)
		}
	}
}

// TestVertexBody: the Gemini body reaches Vertex byte for byte; the key
// header gives way to the bearer token.
func TestVertexBody(t *testing.T) {
	body := []byte("{\"contents\": [{\"role\":\"user\",\"parts\":[{\"text\":\"hi\"}]}],\n \"generationConfig\":{}}")
	r, berr := inspectGenerate(body, "gemini-2.5-pro")
	if berr != nil {
		t.Fatal(berr)
	}
	var p provider.Pieces
	if err := vertexBody(&r, body, nil, &p); err != nil {
		t.Fatal(err)
	}
	if got := bytes.Join(p.Parts(), nil); !bytes.Equal(got, body) {
		t.Errorf("body = %s, want the client's", got)
	}
	h := Header(http.Header{"X-Goog-Api-Client": {"genai-go/1"}}, "key")
	vertexHeader(h, "tok")
	want := http.Header{"Content-Type": {"application/json"}, "X-Goog-Api-Client": {"genai-go/1"}, "Authorization": {"Bearer tok"}}
	if diff := cmp.Diff(h, want); diff != "" {
		t.Errorf("headers (-got +want):\n%s", diff)
	}
}
