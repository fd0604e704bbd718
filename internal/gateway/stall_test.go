package gateway

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/scootgate/scootgate/pkg/usageevent"
)

// chanRecorder hands each usage event to the test as it is recorded.
type chanRecorder chan *usageevent.Event

func (c chanRecorder) Record(ev *usageevent.Event) { c <- ev }

// TestStalledClient: a client that stops reading (HTTP/1.1: a connection
// that reads nothing; HTTP/2: a stream whose window never opens again)
// while the provider keeps streaming has its answer cut once a write
// cannot go out within stream_idle: the request ends, the provider
// request is cancelled, and the usage event says client_stalled. Without
// the write deadline the request would last as long as the client's
// connection. The stall itself takes real time (a socket deadline); the
// test waits for the event, not for a duration.
func TestStalledClient(t *testing.T) {
	event := strings.Repeat("x", 16<<10)
	prov := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for r.Context().Err() == nil {
			if _, err := fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", event); err != nil || rc.Flush() != nil {
				return
			}
		}
	}))
	defer prov.Close()
	const body = `{"model":"gpt","stream":true,"messages":[]}`

	tests := []struct {
		name  string
		http2 bool
	}{
		{"HTTP/1.1", false},
		{"HTTP/2", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := make(chanRecorder, 4)
			h := newHandlerAt(t, Options{StreamIdle: 300 * time.Millisecond, Recorders: []Recorder{rec}}, prov.URL+"/v1")
			srv := httptest.NewUnstartedServer(h)
			srv.EnableHTTP2 = tt.http2
			defer srv.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel() // the client leaves only when the test ends
			if tt.http2 {
				srv.StartTLS()
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(body))
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close() // never read
				if resp.ProtoMajor != 2 {
					t.Fatalf("%s, want HTTP/2", resp.Proto)
				}
			} else {
				srv.Start()
				conn, err := net.Dial("tcp", srv.Listener.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				_ = conn.(*net.TCPConn).SetReadBuffer(4 << 10)
				if _, err := fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case ev := <-rec:
				if ev.FailureStage != usageevent.StageClientStalled {
					t.Fatalf("usage event stage %q, want %q", ev.FailureStage, usageevent.StageClientStalled)
				}
			case <-time.After(20 * time.Second): // only when it fails
				t.Fatal("the request still runs 20 s after its client stopped reading")
			}
		})
	}
}

// TestSilenceIsNotAStall: over HTTP/2 a write deadline that passes resets
// the stream even while nothing is being written, so a stream's deadline
// must never pass during a provider silence shorter than stream_idle. The
// provider pauses (its own pace, not the test's synchronisation) for most
// of stream_idle after an event that came shortly after the first.
func TestSilenceIsNotAStall(t *testing.T) {
	const idle = 2 * time.Second
	prov := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for _, pause := range []time.Duration{0, 600 * time.Millisecond, 1500 * time.Millisecond} {
			select {
			case <-time.After(pause):
			case <-r.Context().Done():
				return
			}
			_, _ = io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n")
			_ = rc.Flush()
		}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer prov.Close()
	rec := make(chanRecorder, 4)
	h := newHandlerAt(t, Options{StreamIdle: idle, Recorders: []Recorder{rec}}, prov.URL+"/v1")
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	resp, err := srv.Client().Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"gpt","stream":true,"messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !strings.HasSuffix(string(data), "data: [DONE]\n\n") {
		t.Fatalf("%s: read error %v, body %q", resp.Proto, err, data)
	}
	if ev := <-rec; ev.FailureStage != "" {
		t.Fatalf("usage event stage %q, want success", ev.FailureStage)
	}
}

// TestStreamIdle: a provider that sends a stream's first event (or, for a
// stream in one JSON document, its first bytes) and then nothing is cut
// after stream_idle, and the attempt says so: stage timeout, and for an
// event stream the in-band error naming the silence. The provider stays
// silent until the node gives up; the test waits for the event.
func TestStreamIdle(t *testing.T) {
	tests := []struct {
		name, contentType, first, path, body, wantInBand string
	}{
		{"event stream", "text/event-stream", "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n",
			"/v1/chat/completions", `{"model":"gpt","stream":true,"messages":[]}`, "the provider stream was idle beyond the limit"},
		{"JSON stream", "application/json", `[{"candidates":[{"content":{"parts":[{"text":"one"}]}}]}`,
			"/v1beta/models/gemini:streamGenerateContent", `{"contents":[{"parts":[{"text":"hi"}]}]}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prov := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", tt.contentType)
				_, _ = io.WriteString(w, tt.first)
				_ = http.NewResponseController(w).Flush()
				<-r.Context().Done() // silent until the node gives up
			}))
			defer prov.Close()
			rec := make(chanRecorder, 4)
			h := newHandlerAt(t, Options{StreamIdle: 100 * time.Millisecond, FirstByte: 10 * time.Second, Recorders: []Recorder{rec}}, prov.URL+"/v1")
			srv := httptest.NewServer(h)
			defer srv.Close()
			resp, err := http.Post(srv.URL+tt.path, "application/json", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			data, _ := io.ReadAll(resp.Body) // a cut JSON stream aborts the connection: an error here
			resp.Body.Close()
			if !strings.Contains(string(data), tt.wantInBand) {
				t.Errorf("answer %.300q, want it to say %q", data, tt.wantInBand)
			}
			select {
			case ev := <-rec:
				if ev.FailureStage != usageevent.StageTimeout {
					t.Errorf("usage event stage %q, want %q", ev.FailureStage, usageevent.StageTimeout)
				}
			case <-time.After(20 * time.Second): // only when it fails
				t.Fatal("no usage event 20 s after the provider fell silent")
			}
		})
	}
}
