package app

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// h2cClient speaks HTTP/2 with prior knowledge to http:// URLs, as the
// AWS SDK for JavaScript and load balancers speaking h2c do.
func h2cClient() *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &p}, Timeout: 20 * time.Second}
}

// TestH2CPriorKnowledge: the plaintext listener serves HTTP/2 with prior
// knowledge (docs/operations.md "HTTP/2 limits"): a Messages request and
// a Bedrock InvokeModel stream answer over HTTP/2, HTTP/1.1 still works on
// the same listener, and the connection gets the node's stream limit.
func TestH2CPriorKnowledge(t *testing.T) {
	s := startStack(t, stackOptions{bedrock: true})
	c := h2cClient()
	defer c.CloseIdleConnections()
	for _, tc := range []struct{ path, body string }{
		{"/v1/messages", `{"model":"` + anthropicModel + `","max_tokens":5,"messages":[{"role":"user","content":"over h2c"}]}`},
		{"/model/" + bedrockModel + "/invoke-with-response-stream", `{"anthropic_version":"bedrock-2023-05-31","max_tokens":5,"messages":[{"role":"user","content":"over h2c [[chunks=3]]"}]}`},
	} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.api+tc.path, strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+clientKey)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Anthropic-Version", "2023-06-01")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s over h2c: %v", tc.path, err)
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || resp.ProtoMajor != 2 {
			t.Fatalf("%s: status %d over %s (%v): %s", tc.path, resp.StatusCode, resp.Proto, err, data)
		}
	}
	if r := s.do(http.MethodPost, "/v1/messages", map[string]string{"x-api-key": clientKey, "anthropic-version": "2023-06-01"},
		`{"model":"`+anthropicModel+`","max_tokens":5,"messages":[{"role":"user","content":"over http/1.1"}]}`); r.status != 200 {
		t.Errorf("HTTP/1.1 on the same listener: status %d", r.status)
	}

	// The server's first SETTINGS carry the node's stream limit.
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.api, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	bw := bufio.NewWriter(conn)
	fr := http2.NewFramer(bw, conn)
	if _, err := bw.WriteString(http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatalf("no HTTP/2 frame after the preface: %v", err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok {
		t.Fatalf("first frame %v, want SETTINGS", f)
	}
	if v, ok := sf.Value(http2.SettingMaxConcurrentStreams); !ok || v != h2MaxConcurrentStreams {
		t.Errorf("SETTINGS_MAX_CONCURRENT_STREAMS = %d (%v), want %d", v, ok, h2MaxConcurrentStreams)
	}
}
