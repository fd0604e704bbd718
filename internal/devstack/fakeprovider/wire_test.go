package fakeprovider_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/devstack/fakeprovider"
)

var update = flag.Bool("update", false, "rewrite the golden transcripts in testdata")

const (
	openAIKey    = "sk-fake-openai-key"
	anthropicKey = "sk-ant-fake-key"
)

// fixedNow is the provider clock in every test, so transcripts are stable.
var fixedNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// start serves a provider with both keys and the fixed clock on a loopback
// port and returns it with its base URL (".../v1"); Close runs at cleanup.
func start(t *testing.T, script func(fakeprovider.Request) *fakeprovider.Behaviour) (*fakeprovider.Provider, string) {
	t.Helper()
	p := fakeprovider.New(fakeprovider.Options{
		OpenAIKey:    openAIKey,
		AnthropicKey: anthropicKey,
		Clock:        func() time.Time { return fixedNow },
		Script:       script,
	})
	base, err := p.Start("127.0.0.1:0")
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p, base
}

// post sends a raw request and returns the response (body unread).
func post(t *testing.T, c *http.Client, method, url string, h http.Header, body string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatalf("NewRequest: %v", err)
	}
	req.Header = h
	return c.Do(req)
}

func openAIHeader() http.Header {
	return http.Header{"Authorization": {"Bearer " + openAIKey}, "Content-Type": {"application/json"}}
}

func anthropicHeader() http.Header {
	return http.Header{"X-Api-Key": {anthropicKey}, "Anthropic-Version": {"2023-06-01"}, "Content-Type": {"application/json"}}
}

// TestWireTranscripts pins the exact bytes of every answer shape against
// testdata/*.golden (status, headers but Date, body, and how the body ended).
func TestWireTranscripts(t *testing.T) {
	oa := func(content string, extra string) string {
		return fmt.Sprintf(`{"model":"gpt-test",%s"messages":[{"role":"system","content":"be brief"},{"role":"user","content":%q}]}`, extra, content)
	}
	an := func(content string, extra string) string {
		return fmt.Sprintf(`{"model":"claude-test","max_tokens":64,%s"system":[{"type":"text","text":"be brief"}],"messages":[{"role":"user","content":[{"type":"text","text":%q}]}]}`, extra, content)
	}
	const stream, streamUsage = `"stream":true,`, `"stream":true,"stream_options":{"include_usage":true},`
	noVersion := anthropicHeader()
	noVersion.Del("Anthropic-Version")
	wrongKey := openAIHeader()
	wrongKey.Set("Authorization", "Bearer nope")
	anWrongKey := anthropicHeader()
	anWrongKey.Set("X-Api-Key", "nope")

	tests := []struct {
		name   string
		method string
		path   string
		header http.Header
		body   string
	}{
		{"openai_nonstream", "POST", "/chat/completions", openAIHeader(), oa("hello there", "")},
		{"openai_stream", "POST", "/chat/completions", openAIHeader(), oa("hello there", stream)},
		{"openai_stream_usage", "POST", "/chat/completions", openAIHeader(), oa("hi [[chunks=2]] [[cache_read=4]] [[reasoning=2]]", streamUsage)},
		{"openai_error_event", "POST", "/chat/completions", openAIHeader(), oa("hi [[error_event=after:2]]", streamUsage)},
		{"openai_cut", "POST", "/chat/completions", openAIHeader(), oa("hi [[cut=after_events:2]]", stream)},
		{"openai_cut_late", "POST", "/chat/completions", openAIHeader(), oa("hi [[cut=after_events:99]]", stream)},
		{"openai_cut_nonstream", "POST", "/chat/completions", openAIHeader(), oa("hi [[cut=after_events:0]]", "")},
		{"openai_429", "POST", "/chat/completions", openAIHeader(), oa("hi [[status=429]] [[retry_after=7]]", stream)},
		{"openai_quota", "POST", "/chat/completions", openAIHeader(), oa("hi [[quota]]", "")},
		{"openai_500", "POST", "/chat/completions", openAIHeader(), oa("hi [[status=500]]", "")},
		{"completions_stream_usage", "POST", "/completions", openAIHeader(), `{"model":"gpt-test","prompt":"fill me [[chunks=2]]","suffix":"end","stream":true,"stream_options":{"include_usage":true}}`},
		{"rerank", "POST", "/rerank", openAIHeader(), `{"model":"rerank-test","query":"best fruit","documents":["apple pie",{"text":"cherry"}],"top_n":1}`},
		{"openai_wrong_key", "POST", "/chat/completions", wrongKey, oa("hi", "")},
		{"openai_bad_json", "POST", "/chat/completions", openAIHeader(), `{"model":`},
		{"openai_missing_model", "POST", "/chat/completions", openAIHeader(), `{"messages":[]}`},
		{"openai_bad_directive", "POST", "/chat/completions", openAIHeader(), oa("hi [[stauts=429]]", "")},
		{"openai_models", "GET", "/models", openAIHeader(), ""},
		{"anthropic_nonstream", "POST", "/messages", anthropicHeader(), an("hello there [[cache_read=4]] [[cache_write=2]]", "")},
		{"anthropic_stream", "POST", "/messages?beta=true", anthropicHeader(), an("hello there", stream)},
		{"anthropic_error_event", "POST", "/messages", anthropicHeader(), an("hi [[error_event=after:3]]", stream)},
		{"anthropic_cut", "POST", "/messages", anthropicHeader(), an("hi [[cut=after_events:1]]", stream)},
		{"anthropic_529", "POST", "/messages", anthropicHeader(), an("hi [[status=529]]", "")},
		{"anthropic_quota", "POST", "/messages", anthropicHeader(), an("hi [[quota]] [[retry_after=2]]", "")},
		{"anthropic_no_version", "POST", "/messages", noVersion, an("hi", "")},
		{"anthropic_wrong_key", "POST", "/messages", anWrongKey, an("hi", "")},
		{"anthropic_models", "GET", "/models", anthropicHeader(), ""},
		{"unknown_path", "POST", "/engines/davinci/completions", openAIHeader(), oa("hi", "")},
		{"wrong_method", "GET", "/chat/completions", openAIHeader(), ""},
	}
	p, base := start(t, nil)
	c := &http.Client{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p.Reset() // ids restart at 1 in every transcript
			resp, err := post(t, c, tt.method, base+tt.path, tt.header, tt.body)
			if err != nil {
				t.Fatalf("request: %v", err)
			}
			defer resp.Body.Close()
			got := transcript(resp)
			golden := filepath.Join("testdata", tt.name+".golden")
			if *update {
				if err := os.WriteFile(golden, got, 0o600); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if diff := cmp.Diff(string(got), string(want)); diff != "" {
				t.Errorf("transcript (-got +want):\n%s", diff)
			}
		})
	}
}

// transcript renders a response: status, sorted headers except Date, the
// body, and a last line saying how the body ended.
func transcript(resp *http.Response) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP %d\n", resp.StatusCode)
	keys := make([]string, 0, len(resp.Header))
	for k := range resp.Header {
		if k != "Date" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %s\n", k, strings.Join(resp.Header[k], ", "))
	}
	b.WriteString("\n")
	body, err := io.ReadAll(resp.Body)
	b.Write(body)
	switch {
	case err == nil:
		b.WriteString("\n-- end of body\n")
	case errors.Is(err, io.ErrUnexpectedEOF):
		b.WriteString("\n-- truncated: unexpected EOF\n")
	default:
		fmt.Fprintf(&b, "\n-- read error: %v\n", err)
	}
	return b.Bytes()
}

func TestRecordingAndCounts(t *testing.T) {
	p, base := start(t, nil)
	keepAlive := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(keepAlive.CloseIdleConnections)
	oneShot := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

	send := func(c *http.Client, path string, h http.Header, body string) {
		t.Helper()
		resp, err := post(t, c, "POST", base+path, h, body)
		if err != nil {
			t.Fatal(err)
		}
		// Drain so the connection can be reused.
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	chat := `{"model":"gpt-test","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url"},{"type":"text","text":"b"}]}]}`
	msgs := `{"model":"claude-test","max_tokens":8,"messages":[{"role":"user","content":"first"},{"role":"assistant","content":"x"},{"role":"user","content":"second"}]}`
	send(keepAlive, "/chat/completions", openAIHeader(), chat)
	send(keepAlive, "/messages", anthropicHeader(), msgs)
	if got := [2]int64{p.RequestCount(), p.ConnCount()}; got != [2]int64{2, 1} {
		t.Errorf("requests, conns = %v, want [2 1] (one kept-alive connection)", got)
	}
	send(oneShot, "/chat/completions", openAIHeader(), chat)
	send(oneShot, "/chat/completions", openAIHeader(), chat)
	if got := [2]int64{p.RequestCount(), p.ConnCount()}; got != [2]int64{4, 3} {
		t.Errorf("requests, conns = %v, want [4 3]", got)
	}

	type view struct {
		Seq                  int64
		Protocol             fakeprovider.Protocol
		Method, Path         string
		Model                string
		Stream, IncludeUsage bool
		Prompt, Body         string
		KeyOK                bool // the protocol's credential header held the key
	}
	var got []view
	for _, r := range p.Requests()[:2] {
		got = append(got, view{
			r.Seq, r.Protocol, r.Method, r.Path, r.Model, r.Stream, r.IncludeUsage,
			r.Prompt, string(r.Body),
			r.Header.Get("Authorization") == "Bearer "+openAIKey || r.Header.Get("X-Api-Key") == anthropicKey,
		})
	}
	want := []view{
		{1, fakeprovider.OpenAI, "POST", "/v1/chat/completions", "gpt-test", true, true, "a b", chat, true},
		{2, fakeprovider.Anthropic, "POST", "/v1/messages", "claude-test", false, false, "second", msgs, true},
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("Requests (-got +want):\n%s", diff)
	}

	// Requests returns copies.
	first := p.Requests()[0]
	first.Header.Set("Authorization", "changed")
	first.Body[0] = 'X'
	if again := p.Requests()[0]; again.Header.Get("Authorization") != "Bearer "+openAIKey || again.Body[0] != '{' {
		t.Error("mutating a returned Request changed the recorded one")
	}

	p.Reset()
	if n, c, r := p.RequestCount(), p.ConnCount(), p.Requests(); n != 0 || c != 0 || len(r) != 0 {
		t.Errorf("after Reset: requests %d, conns %d, recorded %d; want all 0", n, c, len(r))
	}
}

func TestOpenKeysAcceptAnyCredential(t *testing.T) {
	p := fakeprovider.New(fakeprovider.Options{})
	base, err := p.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	h := http.Header{"Anthropic-Version": {"2023-06-01"}}
	for _, path := range []string{"/chat/completions", "/messages"} {
		resp, err := post(t, http.DefaultClient, "POST", base+path, h, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s without a configured key: status %d, want 200", path, resp.StatusCode)
		}
	}
}
