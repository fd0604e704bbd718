package fakeprovider

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/provider/gemini"
	"github.com/scootgate/scootgate/internal/sse"
)

// geminiCall sends a Gemini request to a fake that wants key "g-key".
func geminiCall(t *testing.T, target, key, body string) (*http.Response, []byte) {
	t.Helper()
	p := New(Options{GeminiKey: "g-key", Clock: func() time.Time { return time.Unix(1700000000, 0) }})
	r := httptest.NewRequest(http.MethodPost, target, strings.NewReader(body))
	if key != "" {
		r.Header.Set("X-Goog-Api-Key", key)
	}
	w := httptest.NewRecorder()
	p.ServeHTTP(w, r)
	resp := w.Result()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

const geminiPrompt = `{"contents":[{"role":"user","parts":[{"text":"hello there world"}]}]}`

// TestGeminiGenerate: a whole answer, its usage as the gateway reads it,
// and the model from the path.
func TestGeminiGenerate(t *testing.T) {
	resp, b := geminiCall(t, "/v1beta/models/gemini-test:generateContent", "g-key", `{"contents":[{"role":"user","parts":[{"text":"hi [[cache_read=4]] [[reasoning=2]]"}]}]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	u, _, ok := gemini.BodyUsage(b)
	// words 3 (directives included) + 4 cached; pieces 3 ("echo: hi") + 2 thoughts
	if !ok || u.InputTokens != 7 || u.CacheReadTokens != 4 || u.OutputTokens != 3+2 || u.ReasoningTokens != 2 {
		t.Errorf("usage %+v, %v from %s", u, ok, b)
	}
	if o := gemini.BodyOutcome(b); o.Model != "gemini-test" || !cmp.Equal(o.FinishReasons, []string{"STOP"}) {
		t.Errorf("outcome %+v", o)
	}
}

// TestGeminiStream: with alt=sse, SSE chunks whose last one ends the
// stream (as the gateway's Terminal reads it) and carries the usage;
// without, one JSON array.
func TestGeminiStream(t *testing.T) {
	resp, b := geminiCall(t, "/v1/models/gemini-test:streamGenerateContent?alt=sse", "g-key", geminiPrompt)
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("status %d, %s: %s", resp.StatusCode, ct, b)
	}
	rd := sse.NewReader(bytes.NewReader(b), 0)
	tr := gemini.NewStream()
	var ends []bool
	for {
		ev, err := rd.Next()
		if err != nil {
			break
		}
		done, failed := gemini.Terminal(&ev)
		if failed {
			t.Errorf("failure in %s", ev.Raw)
		}
		ends = append(ends, done)
		tr.Observe(&ev)
	}
	if !cmp.Equal(ends, []bool{false, false, true}) {
		t.Errorf("terminal per chunk %v, want the last only", ends)
	}
	if u, _, ok := tr.Usage(); !ok || u.InputTokens != 3 || u.OutputTokens != 3 {
		t.Errorf("stream usage %+v, %v", u, ok)
	}

	resp, b = geminiCall(t, "/v1beta/models/gemini-test:streamGenerateContent", "g-key", geminiPrompt)
	var chunks []json.RawMessage
	if resp.StatusCode != 200 || json.Unmarshal(b, &chunks) != nil || len(chunks) != 3 {
		t.Fatalf("without alt=sse: %d %s", resp.StatusCode, b)
	}
	if u, _, ok := gemini.BodyUsage(b); !ok || u.OutputTokens != 3 {
		t.Errorf("array usage %+v, %v", u, ok)
	}
}

// TestGeminiEndpoints: countTokens, embedContent, batchEmbedContents,
// the model list; the key; errors and quota in Google's shape.
func TestGeminiEndpoints(t *testing.T) {
	tests := []struct {
		name, target, key, body string
		status                  int
		want                    string // a part of the body
	}{
		{"count", "/v1beta/models/m:countTokens", "g-key", geminiPrompt, 200, `{"totalTokens":3}`},
		{"count request", "/v1beta/models/m:countTokens", "g-key", `{"generateContentRequest":{"model":"models/m","contents":[{"parts":[{"text":"a b"}]}]}}`, 200, `{"totalTokens":2}`},
		{"embed", "/v1beta/models/m:embedContent", "g-key", `{"content":{"parts":[{"text":"a"}]}}`, 200, `{"embedding":{"values":[`},
		{"batch", "/v1beta/models/m:batchEmbedContents", "g-key", `{"requests":[{"model":"models/m","content":{"parts":[{"text":"a"}]}},{"model":"models/m","content":{"parts":[{"text":"b"}]}}]}`, 200, `"embeddings":[{"values":[0.1,`},
		{"wrong key", "/v1beta/models/m:generateContent", "other", geminiPrompt, 401, `"status":"UNAUTHENTICATED"`},
		{"no key", "/v1beta/models/m:generateContent", "", geminiPrompt, 401, `"code":401`},
		{"key in the query", "/v1beta/models/m:generateContent?key=g-key", "", geminiPrompt, 200, `"finishReason":"STOP"`},
		{"status", "/v1beta/models/m:generateContent", "g-key", `{"contents":[{"parts":[{"text":"[[status=503]]"}]}]}`, 503, `"status":"UNAVAILABLE"`},
		{"quota", "/v1beta/models/m:generateContent", "g-key", `{"contents":[{"parts":[{"text":"[[quota]]"}]}]}`, 429, `PerDay`},
		{"unknown method", "/v1beta/models/m:frobnicate", "g-key", geminiPrompt, 404, `"error"`},
	}
	for _, tt := range tests {
		resp, b := geminiCall(t, tt.target, tt.key, tt.body)
		if resp.StatusCode != tt.status || !strings.Contains(string(b), tt.want) {
			t.Errorf("%s: %d %s, want %d with %s", tt.name, resp.StatusCode, b, tt.status, tt.want)
		}
	}
	_, b := geminiCall(t, "/v1beta/models/m:generateContent", "g-key", `{"contents":[{"parts":[{"text":"[[quota]]"}]}]}`)
	if !gemini.API.QuotaExhausted(429, b) {
		t.Errorf("the gateway does not read the fake's quota answer as exhaustion: %s", b)
	}

	p := New(Options{Models: []string{"gemini-a"}})
	w := httptest.NewRecorder()
	p.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1beta/models", nil))
	if got := w.Body.String(); w.Code != 200 || !strings.Contains(got, `"name":"models/gemini-a"`) {
		t.Errorf("models: %d %s", w.Code, got)
	}
}
