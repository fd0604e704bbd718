package gateway

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/logline"
)

// TestRequestLineEitherWay: the request line the node's log handler
// writes itself is the line slog writes through any other JSON handler,
// field for field, on success and on failures that add stage and error.
func TestRequestLineEitherWay(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	now := func() time.Time { return at } // fixed: ttfb and duration are 0 both ways
	// One backend each for the failures: a failure cools its backend down.
	reqs := []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"gpt","messages":[{"role":"user","content":"hi \"quoted\" \u2028"}]}`},
		{"/v1/messages", `{"model":"claude","max_tokens":5,"messages":[{"role":"user","content":"[[hang]]"}]}`},
		{"/v1/chat/completions", `{"model":"gpt-raw","stream":true,"messages":[{"role":"user","content":"[[cut=after_events:1]]"}]}`},
		{"/v1/chat/completions", `{"model":"gpt","messages":[{"role":"user","content":"[[status=429]]"}]}`},
	}
	run := func(h slog.Handler) {
		hd, _ := newHandler(t, Options{Now: now, FirstByte: 50 * time.Millisecond, Logger: slog.New(h)})
		srv := httptest.NewServer(hd)
		defer srv.Close()
		for _, r := range reqs {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+r.path, strings.NewReader(r.body))
			req.Header.Set("Anthropic-Version", "2023-06-01")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	var fast, slow syncBuffer
	run(logline.NewHandler(&fast, nil))
	run(slog.NewJSONHandler(&slow, nil))
	varying := regexp.MustCompile(`"time":"[^"]*"|"request_id":"sg-[0-9a-f]+"`)
	got, want := varying.ReplaceAllString(fast.String(), ""), varying.ReplaceAllString(slow.String(), "")
	if got != want {
		t.Fatalf("request lines differ:\nnode handler:\n%s\nslog:\n%s", got, want)
	}
	if n := strings.Count(got, `"msg":"request"`); n != len(reqs) || !strings.Contains(got, `"error":`) || !strings.Contains(got, `"stage":`) {
		t.Fatalf("%d request lines, or no failure among them:\n%s", n, got)
	}
}

// syncBuffer is a bytes.Buffer safe for the handler's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}
