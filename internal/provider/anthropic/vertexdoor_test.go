package anthropic

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestVertexDoorsClaimTheirPaths: count-tokens:rawPredict is count_tokens,
// every other rawPredict model Messages.
func TestVertexDoorsClaimTheirPaths(t *testing.T) {
	const res = "/v1/projects/my-project/locations/us-east5/publishers/anthropic/models/"
	tests := []struct {
		path                 string
		messages, countToken bool
		stream               bool
	}{
		{res + "claude:rawPredict", true, false, false},
		{res + "claude:streamRawPredict", true, false, true},
		{res + "count-tokens:rawPredict", false, true, false},
		{res + "count-tokens:streamRawPredict", true, false, true},
		{res + "claude:predict", false, false, false},
	}
	for _, tt := range tests {
		_, stream, ok, _ := matchVertexRawPredict(tt.path)
		_, _, okCount, _ := matchVertexCountTokens(tt.path)
		if ok != tt.messages || okCount != tt.countToken || stream != tt.stream {
			t.Errorf("%s: messages %v count %v stream %v, want %v %v %v", tt.path, ok, okCount, stream, tt.messages, tt.countToken, tt.stream)
		}
	}
}

// TestVertexDoorKeepsMembers: every member but the envelope's keeps its
// bytes and order; the model and stream lead.
func TestVertexDoorKeepsMembers(t *testing.T) {
	h := http.Header{}
	body := `{ "max_tokens" : 5 , "anthropic_version":"vertex-2023-10-16","stream":true, "messages":[ {"role":"user"} ],"anthropic_beta":["x"],"x\u0041":"é"}`
	out, pathModel, berr := vertexDoorRequest([]byte(body), "claude-sonnet-4@20250514", true, h)
	if berr != nil {
		t.Fatal(berr)
	}
	want := `{"model":"claude-sonnet-4@20250514","stream":true,"max_tokens":5,"messages":[ {"role":"user"} ],"x\u0041":"é"}`
	if diff := cmp.Diff(string(out), want); diff != "" || pathModel != "" {
		t.Errorf("body (-got +want):\n%s\npath model %q", diff, pathModel)
	}
	if h.Get("Anthropic-Version") != "" || h.Get("Anthropic-Beta") != "x" {
		t.Errorf("headers %v: want anthropic-beta x and no anthropic-version", h)
	}
	out, _, berr = vertexCountTokensRequest([]byte(`{"anthropic_version":"2023-06-01","model":"m"}`), "", false, h)
	if berr != nil || string(out) != `{"model":"m"}` || h.Get("Anthropic-Version") != "2023-06-01" {
		t.Errorf("count tokens: %s %v, anthropic-version %q", out, berr, h.Get("Anthropic-Version"))
	}
}

// TestGoogleErrorWriter: an Anthropic error document goes back in
// Google's shape with its status; a success passes unchanged.
func TestGoogleErrorWriter(t *testing.T) {
	rec := httptest.NewRecorder()
	rec.Header().Set("X-Request-Id", "rid")
	rec.Header().Set("Content-Length", "99")
	g := &googleErrorWriter{w: rec}
	g.WriteHeader(http.StatusTooManyRequests)
	_, _ = g.Write([]byte(`{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`))
	if rec.Body.Len() != 0 {
		t.Fatalf("wrote %q before Finish", rec.Body.String())
	}
	if err := g.Finish(); err != nil {
		t.Fatal(err)
	}
	want := `{"error":{"code":429,"message":"slow down","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RequestInfo","requestId":"rid"}]}}`
	if diff := cmp.Diff(rec.Body.String(), want); diff != "" || rec.Code != 429 || rec.Header().Get("Content-Length") != "" {
		t.Errorf("status %d, body (-got +want):\n%s", rec.Code, diff)
	}

	rec = httptest.NewRecorder()
	g = &googleErrorWriter{w: rec}
	_, _ = g.Write([]byte(`{"type":"message"}`))
	if err := g.Finish(); err != nil || rec.Code != 200 || rec.Body.String() != `{"type":"message"}` {
		t.Errorf("success: %d %q %v", rec.Code, rec.Body.String(), err)
	}
}

// FuzzVertexDoorRequest: whatever the client's body, the door refuses it
// or makes a JSON object that names the model and holds none of the
// envelope's members.
func FuzzVertexDoorRequest(f *testing.F) {
	f.Add([]byte(`{"anthropic_version":"vertex-2023-10-16","max_tokens":5,"messages":[]}`), true)
	f.Add([]byte(`{"anthropic_version":"2023-06-01","stream":false,"anthropic_beta":["a"]}`), false)
	f.Add([]byte(`{"anthropic_version":"vertex-2023-10-16","anthropic_version":"x"}`), false)
	f.Fuzz(func(t *testing.T, body []byte, stream bool) {
		out, _, berr := vertexDoorRequest(body, "m@1", stream, http.Header{})
		if berr != nil {
			return
		}
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(out, &doc); err != nil {
			t.Fatalf("%q made %q: %v", body, out, err)
		}
		if string(doc["model"]) != `"m@1"` || doc["anthropic_version"] != nil || doc["anthropic_beta"] != nil {
			t.Fatalf("%q made %q", body, out)
		}
		if got := doc["stream"] != nil; got != stream {
			t.Fatalf("%q made %q: stream member %v, want %v", body, out, got, stream)
		}
	})
}
