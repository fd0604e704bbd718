package gateway

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/pkg/usageevent"
)

// bigAnswer is a chat completion of about size bytes whose usage comes
// last, as providers write it.
func bigAnswer(size int) []byte {
	const (
		head = `{"id":"x","object":"chat.completion","model":"provider-gpt","choices":[{"index":0,"message":{"role":"assistant","content":"`
		tail = `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":11,"total_tokens":18}}`
	)
	var b bytes.Buffer
	b.Grow(size)
	b.WriteString(head)
	for b.Len() < size-len(tail) {
		b.WriteString("all work and no play ")
	}
	b.WriteString(tail)
	return b.Bytes()
}

// lengthTransport is cannedTransport with the answer's length known
// (Content-Length) or not (chunked).
type lengthTransport struct {
	body  []byte
	known bool
}

func (c *lengthTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	_, _ = io.Copy(io.Discard, r.Body)
	r.Body.Close()
	n := int64(-1)
	if c.known {
		n = int64(len(c.body))
	}
	return &http.Response{
		StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader(c.body)),
		ContentLength: n, Request: r,
	}, nil
}

// BenchmarkLargeAnswer relays a non-stream answer just under the 64 MiB
// limit, with and without Content-Length: B/op is what the node holds of
// it.
func BenchmarkLargeAnswer(b *testing.B) {
	body := bigAnswer(maxProviderBody - 1<<10)
	for _, known := range []bool{true, false} {
		name := "chunked"
		if known {
			name = "length"
		}
		b.Run(name, func(b *testing.B) {
			h, _ := newHandler(b, Options{})
			h.o.Transport = &lengthTransport{body: body, known: known}
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			w := &benchWriter{}
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(`{"model":"gpt","messages":[]}`))
				w.reset()
				h.ServeHTTP(w, r)
				if w.status != 200 {
					b.Fatalf("status %d", w.status)
				}
			}
		})
	}
}

// TestLargeAnswerRelayed: a non-stream answer far larger than the node's
// buffer is relayed as it arrives, byte for byte, and its usage read on
// the way: the node allocates a small part of its size, not the whole
// answer (the memory a node needs for a few concurrent large answers
// must not be their size, nor two or three times it).
func TestLargeAnswerRelayed(t *testing.T) {
	const size = 16 << 20
	body := bigAnswer(size)
	for _, known := range []bool{true, false} {
		name := "chunked"
		if known {
			name = "length"
		}
		t.Run(name, func(t *testing.T) {
			prov := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/json")
				if known {
					w.Header().Set("Content-Length", strconv.Itoa(len(body)))
				}
				rc := http.NewResponseController(w)
				for rest := body; len(rest) > 0; {
					n := min(len(rest), 64<<10)
					if _, err := w.Write(rest[:n]); err != nil || rc.Flush() != nil {
						return
					}
					rest = rest[n:]
				}
			}))
			defer prov.Close()
			rec := &events{}
			h := newHandlerAt(t, Options{Recorders: []Recorder{rec}}, prov.URL+"/v1")
			srv := httptest.NewServer(h)
			defer srv.Close()

			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"gpt","messages":[]}`))
			if err != nil {
				t.Fatal(err)
			}
			eq := &equalWriter{want: body}
			_, err = io.Copy(eq, resp.Body)
			resp.Body.Close()
			runtime.ReadMemStats(&after)
			if err != nil || resp.StatusCode != 200 || !eq.ok() {
				t.Fatalf("status %d, err %v, the client got %d bytes, equal to the answer's start: %v", resp.StatusCode, err, eq.n, eq.same)
			}
			if known && resp.ContentLength != int64(len(body)) {
				t.Errorf("Content-Length %d, want %d", resp.ContentLength, len(body))
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > size/4 {
				t.Errorf("relaying a %d MiB answer allocated %d KiB: it was held whole", size>>20, alloc>>10)
			}
			srv.Close() // waits for the handler: its usage event is recorded
			evs := rec.all()
			if len(evs) != 1 {
				t.Fatalf("%d usage events, want 1", len(evs))
			}
			got := struct {
				Stage string
				Usage *usageevent.Usage
				Bytes int64
			}{evs[0].FailureStage, evs[0].Usage, evs[0].ResponseBytes}
			want := struct {
				Stage string
				Usage *usageevent.Usage
				Bytes int64
			}{"", &usageevent.Usage{InputTokens: 7, OutputTokens: 11}, int64(len(body))}
			if diff := cmp.Diff(got, want); diff != "" {
				t.Errorf("usage event (-got +want):\n%s", diff)
			}
		})
	}
}

// equalWriter compares what is written to it with want, keeping nothing.
type equalWriter struct {
	want []byte
	n    int
	same bool
	bad  bool
}

func (e *equalWriter) Write(p []byte) (int, error) {
	if !e.bad && (e.n+len(p) > len(e.want) || !bytes.Equal(p, e.want[e.n:e.n+len(p)])) {
		e.bad = true
	}
	e.n += len(p)
	e.same = !e.bad
	return len(p), nil
}

func (e *equalWriter) ok() bool { return !e.bad && e.n == len(e.want) }

// TestLargeAnswerFails: an answer past the size limit, or one whose
// provider fails after the first bytes went out, aborts the client's
// connection (a chunked answer never ends as if complete), holding a small
// buffer only; one whose Content-Length is past the limit gets a 502
// before anything is read.
func TestLargeAnswerFails(t *testing.T) {
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	tests := []struct {
		name       string
		serve      func(w http.ResponseWriter, rc *http.ResponseController)
		wantStatus int    // 0: the status went out, then the connection broke
		wantStage  string // the usage event's
	}{
		{"endless", func(w http.ResponseWriter, rc *http.ResponseController) {
			_, _ = w.Write([]byte(`{"id":"x","choices":[{"message":{"content":"`))
			for {
				if _, err := w.Write(chunk); err != nil || rc.Flush() != nil {
					return
				}
			}
		}, 0, usageevent.StageResponseBody},
		{"provider breaks", func(w http.ResponseWriter, rc *http.ResponseController) {
			_, _ = w.Write([]byte(`{"id":"x","choices":[{"message":{"content":"`))
			for range 4 {
				_, _ = w.Write(chunk)
			}
			_ = rc.Flush()
			panic(http.ErrAbortHandler)
		}, 0, usageevent.StageResponseBody},
		{"declared too large", func(w http.ResponseWriter, rc *http.ResponseController) {
			w.Header().Set("Content-Length", strconv.Itoa(maxProviderBody+1))
			_, _ = w.Write(chunk)
		}, http.StatusBadGateway, usageevent.StageResponseBody},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prov := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/json")
				tt.serve(w, http.NewResponseController(w))
			}))
			defer prov.Close()
			rec := &events{}
			h := newHandlerAt(t, Options{Recorders: []Recorder{rec}}, prov.URL+"/v1")
			srv := httptest.NewServer(h)
			defer srv.Close()

			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"gpt","messages":[]}`))
			if err != nil {
				t.Fatal(err)
			}
			n, err := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			runtime.ReadMemStats(&after)
			if tt.wantStatus == 0 {
				if resp.StatusCode != 200 || err == nil {
					t.Fatalf("status %d, %d bytes, read error %v: want 200 and a broken answer", resp.StatusCode, n, err)
				}
			} else if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
				t.Errorf("allocated %d KiB: the answer was held", alloc>>10)
			}
			srv.Close()
			if evs := rec.all(); len(evs) != 1 || evs[0].FailureStage != tt.wantStage {
				t.Fatalf("usage events %+v, want one with stage %q", evs, tt.wantStage)
			}
		})
	}
}
