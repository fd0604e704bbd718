package gateway

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scootgate/scootgate/pkg/usageevent"
)

// TestNonStreamLimits: a non-stream answer is cut by the nearer of
// first_byte and non_stream_total, with a 504, a timeout stage and the
// limit that fired named in the log (docs/api.md "Timeouts").
func TestNonStreamLimits(t *testing.T) {
	tests := []struct {
		name             string
		firstByte, total time.Duration
		want             error
	}{
		{"first byte nearer", 100 * time.Millisecond, 5 * time.Second, errFirstByteTimeout},
		{"total nearer", 5 * time.Second, 100 * time.Millisecond, errTotalTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs syncBuffer
			rec := &events{}
			h, _ := newHandler(t, Options{FirstByte: tt.firstByte, NonStreamTotal: tt.total, Recorders: []Recorder{rec},
				Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
			srv := httptest.NewServer(h)
			defer srv.Close()
			resp, _ := postChat(t, srv.URL, `{"model":"gpt","messages":[{"role":"user","content":"[[hang]]"}]}`)
			if resp.StatusCode != http.StatusGatewayTimeout {
				t.Fatalf("status %d, want 504", resp.StatusCode)
			}
			if evs := rec.all(); len(evs) != 1 || evs[0].FailureStage != usageevent.StageTimeout {
				t.Fatalf("usage events %+v, want one with stage timeout", evs)
			}
			if !strings.Contains(logs.String(), `"error":"`+tt.want.Error()+`"`) {
				t.Fatalf("the log does not name %q:\n%s", tt.want, logs.String())
			}
		})
	}
}

// TestStreamAnswerToNonStreamRequest: a provider that answers a non-stream
// request with an event stream has the whole exchange bounded by
// non_stream_total, although its first event stopped the first-byte
// timer: the stream is cut in band, never finished.
func TestStreamAnswerToNonStreamRequest(t *testing.T) {
	prov := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := range 100 { // 2 s of events, then the terminator
			if _, err := fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%d\"}}]}\n\n", i); err != nil || rc.Flush() != nil {
				return
			}
			select {
			case <-tick.C:
			case <-r.Context().Done():
				return
			}
		}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer prov.Close()
	h := newHandlerAt(t, Options{NonStreamTotal: 200 * time.Millisecond}, prov.URL)
	srv := httptest.NewServer(h)
	defer srv.Close()
	_, data := postChat(t, srv.URL, `{"model":"gpt","messages":[{"role":"user","content":"hi"}]}`)
	if strings.Contains(string(data), "[DONE]") || !strings.Contains(string(data), "without its terminator") {
		t.Fatalf("a stream answer to a non-stream request ran past non_stream_total:\n%.300s", data)
	}
}

// TestSlowBodyAfterHeaders: first_byte ends at the response headers
// (docs/api.md "Timeouts"); a non-stream body that takes longer than
// first_byte after them is bounded by non_stream_total only.
func TestSlowBodyAfterHeaders(t *testing.T) {
	const firstByte = 100 * time.Millisecond
	prov := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_ = http.NewResponseController(w).Flush()
		select { // the body comes well after first_byte
		case <-time.After(3 * firstByte):
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"late"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	defer prov.Close()
	h := newHandlerAt(t, Options{FirstByte: firstByte, NonStreamTotal: 10 * time.Second}, prov.URL)
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, data := postChat(t, srv.URL, `{"model":"gpt","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(data), "late") {
		t.Fatalf("status %d, body %.200s: a body after the headers was cut by first_byte", resp.StatusCode, data)
	}
}

// TestJSONStreamAfterHeaders: a stream request answered in JSON (Gemini's
// streamGenerateContent without alt=sse, a JSON array) is relayed whole
// and, once the headers are in, bounded by non_stream_total like any
// whole answer: a long answer is not cut at first_byte after the provider
// already ran it.
func TestJSONStreamAfterHeaders(t *testing.T) {
	const firstByte = 100 * time.Millisecond
	prov := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, `[{"candidates":[{"content":{"parts":[{"text":"one"}]}}]}`)
		_ = http.NewResponseController(w).Flush()
		select { // the rest of the array comes well after first_byte
		case <-time.After(3 * firstByte):
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, `,{"candidates":[{"content":{"parts":[{"text":" two"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":2,"totalTokenCount":3}}]`)
	}))
	defer prov.Close()
	h := newHandlerAt(t, Options{FirstByte: firstByte, NonStreamTotal: 10 * time.Second}, prov.URL+"/v1")
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1beta/models/gemini:streamGenerateContent", "application/json",
		strings.NewReader(`{"contents":[{"parts":[{"text":"hi"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(data), `"finishReason":"STOP"`) {
		t.Fatalf("status %d, body %.200s: a JSON stream was cut by first_byte", resp.StatusCode, data)
	}
}

// TestJSONStreamRelayedAsItArrives: a stream the provider sends as one
// growing JSON array (Gemini without alt=sse) reaches the client element
// by element: the provider holds its second element until the client has
// read the first through the node. A cut array aborts the client's
// connection rather than ending as if complete.
func TestJSONStreamRelayedAsItArrives(t *testing.T) {
	const first = `[{"candidates":[{"content":{"parts":[{"text":"one"}]}}]}`
	const rest = `,{"candidates":[{"content":{"parts":[{"text":" two"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":2,"totalTokenCount":3}}]`
	release := make(chan struct{})
	var gaveUp atomic.Bool
	var calls atomic.Int32
	prov := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, first)
		_ = http.NewResponseController(w).Flush()
		if calls.Add(1) == 2 {
			panic(http.ErrAbortHandler) // the second answer is cut after its first element
		}
		select {
		case <-release:
		case <-time.After(10 * time.Second): // only when the node held the first element back
			gaveUp.Store(true)
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, rest)
	}))
	defer prov.Close()
	events := &eventLog{}
	h := newHandlerAt(t, Options{Recorders: []Recorder{events}}, prov.URL+"/v1")
	srv := httptest.NewServer(h)
	defer srv.Close()

	resp, err := http.Post(srv.URL+"/v1beta/models/gemini:streamGenerateContent", "application/json",
		strings.NewReader(`{"contents":[{"parts":[{"text":"hi"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(first))
	if _, err := io.ReadFull(resp.Body, got); err != nil || string(got) != first {
		t.Fatalf("first element: %q, %v", got, err)
	}
	if gaveUp.Load() {
		t.Fatal("the node held the first element until the provider sent the rest")
	}
	close(release)
	tail, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(tail) != rest {
		t.Fatalf("rest: %q, %v", tail, err)
	}
	if ev := events.last(); ev.Usage == nil || ev.Usage.OutputTokens != 2 || ev.FailureStage != "" {
		t.Errorf("usage event: stage %q usage %+v", ev.FailureStage, ev.Usage)
	}

	resp, err = http.Post(srv.URL+"/v1beta/models/gemini:streamGenerateContent", "application/json",
		strings.NewReader(`{"contents":[{"parts":[{"text":"hi"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	cut, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil {
		t.Errorf("a cut array read as complete: %q", cut)
	}
	if ev := events.last(); ev.FailureStage == "" {
		t.Errorf("the cut stream's event has no failure stage")
	}
}
