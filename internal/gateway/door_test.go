package gateway

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/google/go-cmp/cmp"
)

// postDoor posts body to path on the node at base, as a Bedrock client
// does (no anthropic-version header: the version is in the body).
func postDoor(t *testing.T, base, path, body string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, data
}

// TestBedrockDoorWhole: a Bedrock InvokeModel request for a model whose
// target is Anthropic's own API reaches it as a Messages request (model
// in the body, version member gone, betas as headers) and its answer comes
// back unchanged.
func TestBedrockDoorWhole(t *testing.T) {
	h, prov := newHandler(t, Options{})
	srv := httptest.NewServer(h)
	defer srv.Close()

	body := `{"anthropic_version":"bedrock-2023-05-31","anthropic_beta":["b1","b2"],"max_tokens":5,"messages":[{"role":"user","content":"hello there"}]}`
	resp, data := postDoor(t, srv.URL, "/model/claude/invoke", body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, data)
	}
	var msg struct {
		Type  string `json:"type"`
		Model string `json:"model"`
	}
	if err := json.Unmarshal(data, &msg); err != nil || msg.Type != "message" {
		t.Fatalf("answer is not a Messages document (%v): %s", err, data)
	}
	if got := resp.Header.Get("X-Amzn-Requestid"); got == "" || got != resp.Header.Get("X-Request-Id") {
		t.Errorf("x-amzn-requestid %q, want the node's request id %q", got, resp.Header.Get("X-Request-Id"))
	}
	reqs := prov.Requests()
	if len(reqs) != 1 {
		t.Fatalf("provider saw %d requests, want 1", len(reqs))
	}
	sent := reqs[0]
	want := `{"model":"provider-claude","max_tokens":5,"messages":[{"role":"user","content":"hello there"}]}`
	if diff := cmp.Diff(string(sent.Body), want); diff != "" {
		t.Errorf("provider body (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(sent.Header.Values("Anthropic-Beta"), []string{"b1", "b2"}); diff != "" {
		t.Errorf("anthropic-beta (-got +want):\n%s", diff)
	}
}

// TestBedrockDoorStream: invoke-with-response-stream answers in AWS
// event-stream framing, one chunk per Messages stream event, whose bytes
// are the event's data unchanged; the provider got a streaming Messages
// request.
func TestBedrockDoorStream(t *testing.T) {
	h, prov := newHandler(t, Options{})
	srv := httptest.NewServer(h)
	defer srv.Close()

	body := `{"anthropic_version":"bedrock-2023-05-31","max_tokens":5,"messages":[{"role":"user","content":"one two three [[chunks=3]]"}]}`
	resp, data := postDoor(t, srv.URL, "/model/claude/invoke-with-response-stream", body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, data)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/vnd.amazon.eventstream" {
		t.Fatalf("content-type %q", ct)
	}
	if reqs := prov.Requests(); len(reqs) != 1 || !reqs[0].Stream || reqs[0].Model != "provider-claude" {
		t.Fatalf("provider requests %+v, want one streaming request for provider-claude", reqs)
	}
	dec := eventstream.NewDecoder()
	r := bytes.NewReader(data)
	var types []string
	for {
		m, err := dec.Decode(r, nil)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("frame %d: %v", len(types), err)
		}
		if got := m.Headers.Get(":event-type"); got == nil || got.String() != "chunk" {
			t.Fatalf("frame %d event type %v, want chunk", len(types), got)
		}
		var chunk struct {
			Bytes string `json:"bytes"`
		}
		if err := json.Unmarshal(m.Payload, &chunk); err != nil {
			t.Fatalf("frame %d payload %s: %v", len(types), m.Payload, err)
		}
		ev, err := base64.StdEncoding.DecodeString(chunk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(ev, &e); err != nil {
			t.Fatalf("chunk %d is not a Messages event: %s", len(types), ev)
		}
		types = append(types, e.Type)
	}
	if len(types) < 4 || types[0] != "message_start" || types[len(types)-1] != "message_stop" {
		t.Fatalf("event types %v: want message_start … message_stop", types)
	}
}

// TestBedrockDoorRefusals: what the door cannot serve is refused in
// Bedrock's error shape before anything is sent.
func TestBedrockDoorRefusals(t *testing.T) {
	h, prov := newHandler(t, Options{})
	srv := httptest.NewServer(h)
	defer srv.Close()
	const ok = `{"anthropic_version":"bedrock-2023-05-31","max_tokens":5,"messages":[]}`
	tests := []struct {
		name, path, body string
		status           int
		errType          string
	}{
		{"model in the body", "/model/claude/invoke", `{"anthropic_version":"bedrock-2023-05-31","model":"claude","messages":[]}`, 400, "ValidationException"},
		{"stream in the body", "/model/claude/invoke", `{"anthropic_version":"bedrock-2023-05-31","stream":true,"messages":[]}`, 400, "ValidationException"},
		{"no version", "/model/claude/invoke", `{"max_tokens":5,"messages":[]}`, 400, "ValidationException"},
		{"another version", "/model/claude/invoke", `{"anthropic_version":"vertex-2023-10-16","messages":[]}`, 400, "ValidationException"},
		{"version twice in two cases", "/model/claude/invoke", `{"anthropic_version":"bedrock-2023-05-31","Anthropic_Version":"x","messages":[]}`, 400, "ValidationException"},
		{"betas not strings", "/model/claude/invoke", `{"anthropic_version":"bedrock-2023-05-31","anthropic_beta":[1],"messages":[]}`, 400, "ValidationException"},
		{"unknown model", "/model/nope/invoke", ok, 404, "ResourceNotFoundException"},
		{"encoded id of an unknown model", "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fx/invoke", ok, 404, "ResourceNotFoundException"},
		{"doubly encoded id", "/model/a%253Ab/invoke", ok, 400, "ValidationException"},
		{"unencoded slash in the id", "/model/a/b/invoke", ok, 400, "ValidationException"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, data := postDoor(t, srv.URL, tt.path, tt.body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, data)
			}
			if got := resp.Header.Get("X-Amzn-Errortype"); got != tt.errType {
				t.Errorf("x-amzn-errortype %q, want %q", got, tt.errType)
			}
			var doc map[string]string
			if err := json.Unmarshal(data, &doc); err != nil || doc["message"] == "" || len(doc) != 1 {
				t.Errorf("body %s: want Bedrock's {\"message\": …}", data)
			}
		})
	}
	if n := prov.RequestCount(); n != 0 {
		t.Errorf("provider saw %d requests, want 0", n)
	}
}
