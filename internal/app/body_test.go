package app

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
)

// Slow and early-rejected request bodies (docs/api.md "Slow bodies and early answers").
// Every test talks raw HTTP/1.1 over a real loopback socket; the bounds the
// tests wait for are generous multiples of the configured limits, and what
// decides the outcome is the node's own socket deadline, never a sleep.

// requestHead is a POST's request line and headers, ending the header
// block; key "" sends none.
func requestHead(path, key string, contentLength int64, chunked bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: scootgate\r\nContent-Type: application/json\r\n", path)
	if key != "" {
		b.WriteString("Authorization: Bearer " + key + "\r\n")
	}
	if chunked {
		b.WriteString("Transfer-Encoding: chunked\r\n")
	} else {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", contentLength)
	}
	return b.String() + "\r\n"
}

// TestSlowBodyIsCutWhateverItsFraming: a body that stops arriving gets
// 408 at limits.body_read_timeout and the connection closes, with
// Content-Length framing as with chunked. Before, a Content-Length body
// was never cut: the 408 waited for net/http to read the rest first.
func TestSlowBodyIsCutWhateverItsFraming(t *testing.T) {
	s := startStack(t, stackOptions{limits: `body_read_timeout = "300ms"`})
	tests := []struct {
		name string
		head string
		part string // the only body bytes ever sent
	}{
		{"content-length", requestHead("/v1/chat/completions", clientKey, 1000, false), `{"model":"demo-gpt",`},
		{"chunked", requestHead("/v1/chat/completions", clientKey, 0, true), "14\r\n{\"model\":\"demo-gpt\",\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := s.dialAPI(t)
			if _, err := io.WriteString(c, tt.head+tt.part); err != nil {
				t.Fatal(err)
			}
			data := waitClosed(t, c, 10*time.Second)
			resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(string(data))), nil)
			if err != nil {
				t.Fatalf("no answer before the close: %v (read %q)", err, data)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestTimeout || !resp.Close {
				t.Fatalf("status %d close %v, want 408 with Connection: close", resp.StatusCode, resp.Close)
			}
		})
	}
	if n := s.prov.RequestCount(); n != 0 {
		t.Fatalf("provider saw %d requests, want 0", n)
	}
}

// TestEarlyRejectAnswersAtOnce: an answer decided from the headers goes
// out while the body is still missing, and the connection closes after the
// lingering read (200ms here) although the body deadline is 10 minutes
// away. Before, net/http read the rest of a small body before writing the
// 401 or 404, so a client that dripped it held the connection with no limit.
func TestEarlyRejectAnswersAtOnce(t *testing.T) {
	s := startStack(t, stackOptions{limits: "body_read_timeout = \"10m\"\nlinger_timeout = \"200ms\""})
	tests := []struct {
		name string
		head string
		want int
	}{
		{"no key", requestHead("/v1/chat/completions", "", 1000, false), http.StatusUnauthorized},
		{"unknown key", requestHead("/v1/messages", "sk-not-a-key", 1000, false), http.StatusUnauthorized},
		{"no such endpoint", requestHead("/v1/no-such-endpoint", clientKey, 1000, false), http.StatusNotFound},
		{"declared too large", requestHead("/v1/chat/completions", clientKey, 2<<20, false), http.StatusRequestEntityTooLarge},
		{"no key, chunked", requestHead("/v1/chat/completions", "", 0, true), http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := s.dialAPI(t)
			if _, err := io.WriteString(c, tt.head+"{"); err != nil {
				t.Fatal(err)
			}
			if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer while the body was missing: %v", err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want || !resp.Close {
				t.Fatalf("status %d close %v, want %d with Connection: close", resp.StatusCode, resp.Close, tt.want)
			}
			if rest := waitClosed(t, c, 10*time.Second); len(rest) != 0 {
				t.Fatalf("bytes after the answer: %q", rest)
			}
		})
	}
	if n := s.prov.RequestCount(); n != 0 {
		t.Fatalf("provider saw %d requests, want 0", n)
	}
}

// TestEarlyRejectSeenByAClientStillSending: a client that writes its
// whole 40 MiB body before it reads (as most HTTP libraries do) gets the
// early answer, not a reset. Before, the node closed with the body unread,
// its kernel answered the client's next segments with a reset, and the
// client lost the answer with the connection.
func TestEarlyRejectSeenByAClientStillSending(t *testing.T) {
	// A long linger so that a loaded machine still finishes the upload in
	// it; the upload itself takes a fraction of a second on loopback.
	s := startStack(t, stackOptions{limits: `linger_timeout = "1m"`})
	const size = 40 << 20
	tests := []struct {
		name string
		key  string
		want int
	}{
		{"over the body limit", clientKey, http.StatusRequestEntityTooLarge},
		{"no key", "", http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := s.dialAPI(t)
			if err := c.SetDeadline(time.Now().Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
			if _, err := io.WriteString(c, requestHead("/v1/chat/completions", tt.key, size, false)); err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(c, &zeros{n: size}); err != nil {
				t.Fatalf("writing the body: %v (the node closed on a client still sending)", err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("reading the answer after the body: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.want)
			}
		})
	}
}

// TestSDKsSeeTheBodyLimit: the official SDKs get a 413 they can read for a
// request over limits.body_bytes, not a connection error.
func TestSDKsSeeTheBodyLimit(t *testing.T) {
	s := startStack(t, stackOptions{bodyLimit: 1 << 20})
	big := strings.Repeat("x", 4<<20)
	oc, ac := openAIClient(s, clientKey), anthropicClient(s, clientKey)
	_, err := oc.Chat.Completions.New(t.Context(), openAIParams(big))
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("openai: %v, want a 413 API error", err)
	}
	_, err = ac.Messages.New(t.Context(), anthropicParams(big))
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("anthropic: %v, want a 413 API error", err)
	}
}

// TestManyDrippedBodiesAllClosed is the probe's scenario at a smaller
// scale: many unauthenticated connections that each send their headers and
// one body byte are all answered and closed within the lingering bound,
// none held until the body deadline.
func TestManyDrippedBodiesAllClosed(t *testing.T) {
	const conns = 200
	s := startStack(t, stackOptions{limits: "body_read_timeout = \"10m\"\nlinger_timeout = \"200ms\""})
	head := requestHead("/v1/chat/completions", "", 1000, false) + "{"
	cs := make([]net.Conn, conns)
	for i := range cs {
		c := s.dialAPI(t)
		if _, err := io.WriteString(c, head); err != nil {
			t.Fatal(err)
		}
		cs[i] = c
	}
	for i, c := range cs {
		data := waitClosed(t, c, 30*time.Second)
		if !strings.HasPrefix(string(data), "HTTP/1.1 401 ") {
			t.Fatalf("connection %d: %q, want a 401 before the close", i, data)
		}
	}
}
