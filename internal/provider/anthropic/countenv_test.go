package anthropic

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/provider"
)

func TestBedrockCountURL(t *testing.T) {
	base, _ := url.Parse("https://bedrock-runtime.us-east-1.amazonaws.com")
	tests := []struct{ name, model, want string }{
		{"model id", "anthropic.claude-sonnet-4-5-20250929-v1:0",
			"https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/count-tokens"},
		{"cross-region profile: its model", "us.anthropic.claude-3-7-sonnet-20250219-v1:0",
			"https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-3-7-sonnet-20250219-v1%3A0/count-tokens"},
		{"longer geography", "us-gov.anthropic.claude-3-haiku-20240307-v1:0",
			"https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-3-haiku-20240307-v1%3A0/count-tokens"},
		{"profile arn: its model", "arn:aws:bedrock:us-east-1:123456789012:inference-profile/eu.anthropic.claude-x-v1:0",
			"https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-x-v1%3A0/count-tokens"},
		{"application profile arn, as it is", "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3",
			"https://bedrock-runtime.us-east-1.amazonaws.com/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Aapplication-inference-profile%2Fa1b2c3/count-tokens"},
		{"not a segment boundary", "myanthropic.x", "https://bedrock-runtime.us-east-1.amazonaws.com/model/myanthropic.x/count-tokens"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := bedrockCountURL(base, tt.model, false)
			if err != nil {
				t.Fatal(err)
			}
			if got := u.String(); got != tt.want {
				t.Errorf("URL = %s, want %s", got, tt.want)
			}
		})
	}
	if _, err := bedrockCountURL(base, "", false); err == nil {
		t.Error("an empty model id made a URL")
	}
}

// TestBedrockCountBody: the body is CountTokens' invokeModel input whose
// base64 body is exactly the invoke body Messages on Bedrock would send.
func TestBedrockCountBody(t *testing.T) {
	const body = `{"model":"claude", "messages":[{"role":"user","content":"model ü"}],"tools":[]}`
	r, berr := inspectCountTokens([]byte(body), "")
	if berr != nil {
		t.Fatal(berr)
	}
	h := http.Header{"Anthropic-Beta": {"a-1,b-2"}}
	var invoke, count provider.Pieces
	if err := bedrockBody(&r, []byte(body), h, &invoke); err != nil {
		t.Fatal(err)
	}
	if err := bedrockCountBody(&r, []byte(body), h, &count); err != nil {
		t.Fatal(err)
	}
	got := bytes.Join(count.Parts(), nil)
	if count.Len() != len(got) {
		t.Errorf("Len = %d, want %d", count.Len(), len(got))
	}
	var doc struct {
		Input struct {
			InvokeModel struct {
				Body []byte `json:"body"`
			} `json:"invokeModel"`
		} `json:"input"`
	}
	dec := json.NewDecoder(bytes.NewReader(got))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("body %s: %v", got, err)
	}
	want := `{"anthropic_version":"bedrock-2023-05-31","anthropic_beta":["a-1","b-2"], "messages":[{"role":"user","content":"model ü"}],"tools":[]}`
	if diff := cmp.Diff(string(doc.Input.InvokeModel.Body), want); diff != "" {
		t.Errorf("invoke body (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(string(doc.Input.InvokeModel.Body), string(bytes.Join(invoke.Parts(), nil))); diff != "" {
		t.Errorf("not the Messages invoke body (-got +want):\n%s", diff)
	}
	if !strings.HasPrefix(string(got), `{"input":{"invokeModel":{"body":"`) {
		t.Errorf("body %s does not have CountTokens' shape", got)
	}
}

func TestBedrockCountHeader(t *testing.T) {
	h := Header(http.Header{"Anthropic-Beta": {"x"}, "Content-Type": {"application/json; charset=utf-8"}}, "key")
	bedrockCountHeader(h, "")
	want := http.Header{"Content-Type": {"application/json"}}
	if diff := cmp.Diff(h, want); diff != "" {
		t.Errorf("headers (-got +want):\n%s", diff)
	}
}

// TestBedrockCountAnswer: the count becomes Anthropic's, errors become
// Anthropic's error documents, anything else passes unchanged.
func TestBedrockCountAnswer(t *testing.T) {
	tests := []struct {
		name, errType, body string
		status              int
		want                string
	}{
		{"count", "", `{"inputTokens":42}`, 200, `{"input_tokens":42}`},
		{"not a count", "", `{"other":1}`, 200, `{"other":1}`},
		{"throttled", "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/", `{"message":"slow down"}`, 429,
			`{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`},
		{"model without counting", "ValidationException", `{"message":"The provided model doesn't support counting tokens."}`, 400,
			`{"type":"error","error":{"type":"invalid_request_error","message":"The provided model doesn't support counting tokens."}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: tt.status, Header: http.Header{"Content-Length": {"99"}}, ContentLength: 99}
			if tt.errType != "" {
				resp.Header.Set("X-Amzn-Errortype", tt.errType)
			}
			got, err := io.ReadAll(bedrockCountAnswer(resp, strings.NewReader(tt.body)))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("answer = %s, want %s", got, tt.want)
			}
			if string(got) != tt.body && (resp.ContentLength != -1 || resp.Header.Get("Content-Length") != "") {
				t.Error("the length of the original answer is kept")
			}
		})
	}
}

func TestVertexCountURL(t *testing.T) {
	base := provider.VertexResource(&url.URL{Scheme: "https", Host: "us-east5-aiplatform.googleapis.com"}, "my-project", "us-east5")
	u, err := vertexCountURL(base, "claude-sonnet-4@20250514", false)
	if err != nil {
		t.Fatal(err)
	}
	want := "https://us-east5-aiplatform.googleapis.com/v1/projects/my-project/locations/us-east5/publishers/anthropic/models/count-tokens:rawPredict"
	if u.String() != want {
		t.Errorf("URL = %s, want %s", u, want)
	}
}

// TestCountTokensEnvelopes: count_tokens travels on Bedrock and Vertex,
// signed for Bedrock's service like Messages; Vertex keeps the
// protocol's own body edit (the model member names the target's model).
func TestCountTokensEnvelopes(t *testing.T) {
	env := CountTokens.Envelopes
	if env[provider.Bedrock] == nil || env[provider.Bedrock].SigningName != BedrockSigningName {
		t.Error("no signed Bedrock envelope")
	}
	if env[provider.Vertex] == nil || env[provider.Vertex].Body != nil {
		t.Error("no Vertex envelope keeping the protocol's body edit")
	}
	if env[provider.Azure] != nil {
		t.Error("an Azure envelope for an Anthropic endpoint")
	}
}
