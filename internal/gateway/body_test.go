package gateway

import (
	"bytes"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func TestIsEventStream(t *testing.T) {
	for _, ct := range []string{
		"text/event-stream", "text/event-stream; charset=utf-8", "Text/Event-Stream",
		" text/event-stream ;charset=utf-8", "text/event-stream;", "application/json",
		"application/json; charset=utf-8", "text/event-streams", "text/plain", "",
		"text/event-stream; charset=\"utf-8\"",
	} {
		mt, _, err := mime.ParseMediaType(ct)
		want := err == nil && mt == "text/event-stream"
		if got := isEventStream(ct); got != want {
			t.Errorf("isEventStream(%q) = %t, mime.ParseMediaType says %t", ct, got, want)
		}
	}
	// The one intended difference: malformed parameters do not hide the
	// media type.
	if !isEventStream("text/event-stream; ===") {
		t.Error("malformed parameters turned a stream into a whole answer")
	}
}

func TestReadAllLimit(t *testing.T) {
	data := bytes.Repeat([]byte("abcdefgh"), 1000) // 8000 bytes
	for _, tt := range []struct {
		name        string
		size, limit int
		want        int
	}{
		{"sized exactly", len(data) + 1, 1 << 20, len(data)},
		{"sized too small grows", 16, 1 << 20, len(data)},
		{"sized too large", 1 << 16, 1 << 20, len(data)},
		{"limit below the body", 4096, 5000, 5000},
		{"limit equals the body", 4096, len(data), len(data)},
		{"limit one past the body", len(data) + 1, len(data) + 1, len(data)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// OneByteReader: every short read path is taken.
			got, err := readAll(iotest.OneByteReader(bytes.NewReader(data)), tt.size, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data[:tt.want]) {
				t.Fatalf("read %d bytes, want the first %d", len(got), tt.want)
			}
			ref, _ := io.ReadAll(io.LimitReader(bytes.NewReader(data), int64(tt.limit)))
			if !bytes.Equal(got, ref) {
				t.Fatal("differs from io.ReadAll(io.LimitReader(...))")
			}
		})
	}
	if _, err := readAll(iotest.ErrReader(io.ErrUnexpectedEOF), 10, 100); err != io.ErrUnexpectedEOF {
		t.Fatalf("error = %v, want the reader's", err)
	}
	if got, err := readAll(strings.NewReader(""), 0, 10); err != nil || len(got) != 0 {
		t.Fatalf("empty: %q, %v", got, err)
	}
}

// deadlineWriter is an in-memory ResponseWriter that counts the read
// deadlines http.ResponseController sets through it.
type deadlineWriter struct {
	benchWriter
	set int
}

func (w *deadlineWriter) SetReadDeadline(time.Time) error {
	w.set++
	return nil
}

// TestBodyDeadlineSet: the handler bounds the body read with a read
// deadline of its own (set, then cleared), unless the server in front
// already does (Options.BodyDeadlineSet, as the app's guard does).
func TestBodyDeadlineSet(t *testing.T) {
	for _, set := range []bool{false, true} {
		h, _ := newHandler(t, Options{BodyReadTimeout: time.Minute, BodyDeadlineSet: set})
		w := &deadlineWriter{}
		w.reset()
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(`{"model":"gpt","messages":[]}`))
		h.ServeHTTP(w, r)
		if want := map[bool]int{false: 2, true: 0}[set]; w.set != want || w.status != 200 {
			t.Errorf("BodyDeadlineSet %v: %d deadlines set, status %d; want %d, 200", set, w.set, w.status, want)
		}
	}
}

// BenchmarkReadBody reads a request body on a real server connection, with
// the handler setting its own body deadline ("own-deadline") and with
// BodyDeadlineSet ("deadline-set"): the difference is what the pair of
// deadline changes costs per request.
func BenchmarkReadBody(b *testing.B) {
	body := `{"model":"gpt","messages":[{"role":"user","content":"hello there"}]}`
	for _, set := range []bool{false, true} {
		name := map[bool]string{false: "own-deadline", true: "deadline-set"}[set]
		b.Run(name, func(b *testing.B) {
			h, _ := newHandler(b, Options{BodyReadTimeout: time.Minute, BodyDeadlineSet: set})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b.ReportAllocs()
				for b.Loop() {
					r.Body = io.NopCloser(strings.NewReader(body))
					r.ContentLength = int64(len(body))
					if _, err := h.readBody(w, r); err != nil {
						b.Fatal(err)
					}
				}
			}))
			defer srv.Close()
			resp, err := http.Post(srv.URL, "application/json", strings.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
		})
	}
}

// TestBodyLimit: a body over limits.max_body_bytes is refused with 413
// whether or not its length was declared; one within the limit is served.
// Without a Content-Length only the limit bounds the read.
func TestBodyLimit(t *testing.T) {
	h, _ := newHandler(t, Options{BodyLimit: 64})
	small := `{"model":"gpt","messages":[]}`
	large := `{"model":"gpt","messages":[` + strings.Repeat(" ", 64) + `]}`
	tests := []struct {
		name     string
		body     string
		declared bool
		want     int
	}{
		{"declared, within", small, true, http.StatusOK},
		{"declared, over", large, true, http.StatusRequestEntityTooLarge},
		{"undeclared, within", small, false, http.StatusOK},
		{"undeclared, over", large, false, http.StatusRequestEntityTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader = strings.NewReader(tc.body) // httptest declares its length
			if !tc.declared {
				body = io.MultiReader(body) // a length httptest cannot know: -1
			}
			r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", body)
			if (r.ContentLength >= 0) != tc.declared {
				t.Fatalf("ContentLength %d", r.ContentLength)
			}
			r.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.want {
				t.Errorf("status %d, want %d: %s", w.Code, tc.want, w.Body)
			}
		})
	}
}

// TestContentLength: a whole answer's Content-Length is the provider's
// own value when it says the same, else one made from the length.
func TestContentLength(t *testing.T) {
	tests := []struct {
		name     string
		provider []string
		n        int
		want     string
		reused   bool
	}{
		{"the provider's", []string{"1234"}, 1234, "1234", true},
		{"another length", []string{"99"}, 1234, "1234", false},
		{"leading zeros", []string{"01234"}, 1234, "1234", false},
		{"absent", nil, 0, "0", false},
		{"twice", []string{"5", "5"}, 5, "5", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.provider != nil {
				h["Content-Length"] = tc.provider
			}
			got := contentLength(h, tc.n)
			if len(got) != 1 || got[0] != tc.want {
				t.Fatalf("contentLength = %q, want [%q]", got, tc.want)
			}
			if reused := tc.provider != nil && &got[0] == &tc.provider[0]; reused != tc.reused {
				t.Errorf("provider's value reused: %v, want %v", reused, tc.reused)
			}
		})
	}
}
