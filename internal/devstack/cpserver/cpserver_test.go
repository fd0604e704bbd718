package cpserver_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/devstack/cpserver"
	"github.com/scootgate/scootgate/internal/snapshot"
	"github.com/scootgate/scootgate/pkg/snapsign"
)

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func listen(t *testing.T, dir string) *cpserver.Server {
	t.Helper()
	s, err := cpserver.Listen("127.0.0.1:0", dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

type result struct {
	Status int
	ETag   string
	Body   string
}

func TestServe(t *testing.T) {
	const routes = `{"schema":1,"version":7,"backends":[]}`
	dir := t.TempDir()
	write(t, dir, "routes.json", routes)
	write(t, dir, "authz.json", `{"schema":1,"version":"7","keys":[]}`) // version unreadable
	s := listen(t, dir)

	tests := []struct {
		name, method, path string
		ifNoneMatch        []string
		want               result
	}{
		{"unconditional", "GET", "/routes.json", nil, result{200, `"7"`, routes}},
		{"current version", "GET", "/routes.json", []string{`"7"`}, result{304, `"7"`, ""}},
		{"older version", "GET", "/routes.json", []string{`"6"`}, result{200, `"7"`, routes}},
		{"list", "GET", "/routes.json", []string{`"5", "7"`}, result{304, `"7"`, ""}},
		{"two fields", "GET", "/routes.json", []string{`"5"`, `W/"7"`}, result{304, `"7"`, ""}},
		{"star", "GET", "/routes.json", []string{`*`}, result{304, `"7"`, ""}},
		{"prefix is not a match", "GET", "/routes.json", []string{`"70"`}, result{200, `"7"`, routes}},
		{"head", "HEAD", "/routes.json", nil, result{200, `"7"`, ""}},
		{"no readable version: no etag", "GET", "/authz.json", []string{`"7"`}, result{200, "", `{"schema":1,"version":"7","keys":[]}`}},
		{"wait, older version: at once", "GET", "/routes.json?wait=30", []string{`"6"`}, result{200, `"7"`, routes}},
		{"wait, no If-None-Match: at once", "GET", "/routes.json?wait=30", nil, result{200, `"7"`, routes}},
		{"wait not a number: at once", "GET", "/routes.json?wait=soon", []string{`"7"`}, result{304, `"7"`, ""}},
		{"wait=0: at once", "GET", "/routes.json?wait=0", []string{`"7"`}, result{304, `"7"`, ""}},
		{"unknown path", "GET", "/other.json", nil, result{404, "", "404 page not found\n"}},
		{"no traversal", "GET", "/../routes.json", nil, result{404, "", "404 page not found\n"}},
		{"post", "POST", "/routes.json", nil, result{405, "", "method not allowed\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tt.method, s.URL(tt.path), nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range tt.ifNoneMatch {
				req.Header.Add("If-None-Match", v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			got := result{resp.StatusCode, resp.Header.Get("ETag"), string(body)}
			if diff := cmp.Diff(got, tt.want); diff != "" {
				t.Errorf("(-got +want):\n%s", diff)
			}
		})
	}

	// A document that is not there is a 404 until it is published.
	resp, err := http.Get(s.URL(cpserver.AuthzPath))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := os.Remove(filepath.Join(dir, "authz.json")); err != nil {
		t.Fatal(err)
	}
	if resp, err = http.Get(s.URL(cpserver.AuthzPath)); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("removed document: status %d, want 404", resp.StatusCode)
	}
}

func TestETag(t *testing.T) {
	tests := []struct {
		doc    string
		want   string
		wantOK bool
	}{
		{`{"version":1}`, `"1"`, true},
		{`{"schema":1, "version": 18446744073709551615}`, `"18446744073709551615"`, true},
		{`{"version":0}`, `"0"`, true},
		{`{"version":-1}`, "", false},
		{`{"version":1.5}`, "", false},
		{`{"version":"1"}`, "", false},
		{`{"schema":1}`, "", false},
		{`{"version":1`, "", false}, // truncated
		{`[]`, "", false},
	}
	for _, tt := range tests {
		got, ok := cpserver.ETag([]byte(tt.doc))
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("ETag(%s) = %q, %v; want %q, %v", tt.doc, got, ok, tt.want, tt.wantOK)
		}
	}
}

// TestNodeConditionalGet drives the server with the node's own puller:
// once the node holds a version, an unchanged document costs a 304, and a
// bumped version is fetched again.
func TestNodeConditionalGet(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "routes.json", `{"version":1}`)
	s := listen(t, dir)
	u, err := url.Parse(s.URL(cpserver.RoutesPath))
	if err != nil {
		t.Fatal(err)
	}
	src, err := snapshot.NewHTTPSource(u, snapshot.HTTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fetch := func(wantChanged bool, wantData string) {
		t.Helper()
		data, changed, err := src.Fetch(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if changed != wantChanged || string(data) != wantData {
			t.Fatalf("Fetch = %q, changed %v; want %q, %v", data, changed, wantData, wantChanged)
		}
	}
	fetch(true, `{"version":1}`)
	src.SetVersion(1)
	// Same version, different bytes: a real 304 (the body hash would say
	// "changed"), so the server honoured If-None-Match.
	write(t, dir, "routes.json", `{"version":1, "edited":true}`)
	fetch(false, "")
	write(t, dir, "routes.json", `{"version":2}`)
	fetch(true, `{"version":2}`)
}

// publishFile replaces name in dir atomically, as a control plane should:
// write a temporary file, then rename it over the old one.
func publishFile(t *testing.T, dir, name, content string) {
	t.Helper()
	tmp := filepath.Join(dir, "."+name+".tmp")
	write(t, dir, "."+name+".tmp", content)
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

type heldResult struct {
	Status  int
	Applied string // Preference-Applied
	Body    string
}

// poll sends one long poll and returns its answer on a channel.
func poll(t *testing.T, url, ifNoneMatch string) <-chan heldResult {
	t.Helper()
	out := make(chan heldResult, 1)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("If-None-Match", ifNoneMatch)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- heldResult{Body: err.Error()}
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		out <- heldResult{resp.StatusCode, resp.Header.Get("Preference-Applied"), string(body)}
	}()
	return out
}

// TestLongPoll: a request that names the current version with ?wait= is
// held and answered 200 as soon as the file gets a new version (however
// it is replaced), 304 when the wait ends, always with
// Preference-Applied; a rewrite with the same version keeps it held.
func TestLongPoll(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "routes.json", `{"version":7}`)
	held := make(chan struct{}, 1)
	srv := httptest.NewServer(cpserver.NewWithHoldHook(dir, func() { held <- struct{}{} }))
	t.Cleanup(srv.Close)
	url := srv.URL + cpserver.RoutesPath

	// Published by atomic rename while a poll waits: answered at once
	// (the wait is a minute; the test would time out otherwise).
	answer := poll(t, url+"?wait=60", `"7"`)
	<-held
	publishFile(t, dir, "routes.json", `{"version":8}`)
	if diff := cmp.Diff(<-answer, heldResult{200, "wait=60", `{"version":8}`}); diff != "" {
		t.Errorf("publish by rename (-got +want):\n%s", diff)
	}

	// Written in place: the same. A check that falls between the
	// truncation and the write sees a half-saved file, which is served as
	// it is (the node rejects it and keeps polling); the node's next poll
	// then gets the whole document at once.
	answer = poll(t, url+"?wait=60", `"8"`)
	<-held
	write(t, dir, "routes.json", `{"version":9}`)
	got, want := <-answer, heldResult{200, "wait=60", `{"version":9}`}
	if got.Status == http.StatusOK && got.Body != want.Body && strings.HasPrefix(want.Body, got.Body) {
		t.Logf("the hold saw the file half-written (%q); polling again", got.Body)
		got = <-poll(t, url+"?wait=60", `"8"`)
		want.Applied = "" // a new version is answered at once, not held
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("publish in place (-got +want):\n%s", diff)
	}

	// Rewritten with the same version: no change for the node, so the
	// poll stays held until its wait ends and gets 304.
	answer = poll(t, url+"?wait=1", `"9"`)
	<-held
	publishFile(t, dir, "routes.json", `{"version":9,"edited":true}`)
	if diff := cmp.Diff(<-answer, heldResult{304, "wait=1", ""}); diff != "" {
		t.Errorf("same version (-got +want):\n%s", diff)
	}

	// Removed while held: the hold ends with the error.
	answer = poll(t, url+"?wait=60", `"9"`)
	<-held
	if err := os.Remove(filepath.Join(dir, "routes.json")); err != nil {
		t.Fatal(err)
	}
	if got := <-answer; got.Status != http.StatusNotFound {
		t.Errorf("removed while held: %+v, want 404", got)
	}
}

// TestLongPollKeepalive: a held request that asks for keepalive is
// answered 200 at once and kept moving with newlines: it ends with the
// new document behind them, or with newlines only when the wait ends
// unchanged (the node's 304).
func TestLongPollKeepalive(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "routes.json", `{"version":7}`)
	held := make(chan struct{}, 1)
	srv := httptest.NewServer(cpserver.NewWithHoldHook(dir, func() { held <- struct{}{} }))
	t.Cleanup(srv.Close)
	url := srv.URL + cpserver.RoutesPath

	// Unchanged for the whole wait: keepalive only (one a second, two
	// seconds held).
	got := <-poll(t, url+"?wait=2&keepalive=1", `"7"`)
	<-held
	if got.Status != 200 || got.Applied != "wait=2, keepalive=1" || got.Body == "" || strings.Trim(got.Body, "\n") != "" {
		t.Errorf("unchanged: %+v, want 200, keepalive applied, newlines only", got)
	}

	answer := poll(t, url+"?wait=60&keepalive=1", `"7"`)
	<-held
	publishFile(t, dir, "routes.json", `{"version":8}`)
	got = <-answer
	if got.Status != 200 || got.Applied != "wait=60, keepalive=1" || strings.TrimLeft(got.Body, "\n") != `{"version":8}` {
		t.Errorf("published: %+v, want 200 with the new document", got)
	}
}

// TestLongPollEnvelope: a signed document's ETag is its payload's
// version, so long polls and 304s work for signed snapshots too.
func TestLongPollEnvelope(t *testing.T) {
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	env := func(v string) string {
		return string(snapsign.Sign(snapsign.RoutesPayloadType, []byte(`{"schema":1,"version":`+v+`}`), key).Marshal())
	}
	if etag, ok := cpserver.ETag([]byte(env("12"))); !ok || etag != `"12"` {
		t.Fatalf("envelope ETag = %q, %v", etag, ok)
	}
	dir := t.TempDir()
	write(t, dir, "routes.json", env("12"))
	held := make(chan struct{}, 1)
	srv := httptest.NewServer(cpserver.NewWithHoldHook(dir, func() { held <- struct{}{} }))
	t.Cleanup(srv.Close)
	answer := poll(t, srv.URL+cpserver.RoutesPath+"?wait=60", `"12"`)
	<-held
	publishFile(t, dir, "routes.json", env("13"))
	if got := <-answer; got.Status != 200 || got.Body != env("13") {
		t.Errorf("got %+v", got)
	}
}

// TestNodeLongPoll drives the server with the node's own poller and a
// long poll: each publish is applied without waiting for poll_interval
// (an hour here), and every poll the server held says so.
func TestNodeLongPoll(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "routes.json", `{"version":1}`)
	held := make(chan struct{}, 1)
	srv := httptest.NewServer(cpserver.NewWithHoldHook(dir, func() { held <- struct{}{} }))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL + cpserver.RoutesPath)
	if err != nil {
		t.Fatal(err)
	}
	src, err := snapshot.NewHTTPSource(u, snapshot.HTTPOptions{LongPoll: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	applied := make(chan uint64, 1)
	p := snapshot.NewPoller(snapshot.PollerOptions{
		Name: "routes", Source: src, Interval: time.Hour,
		Decode: func(data []byte) (uint64, func() error, error) {
			var d struct{ Version uint64 }
			if err := json.Unmarshal(data, &d); err != nil {
				return 0, nil, err
			}
			return d.Version, func() error { applied <- d.Version; return nil }, nil
		},
	})
	if err := p.Poll(t.Context()); err != nil {
		t.Fatal(err)
	}
	<-applied
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	for v := 2; v <= 4; v++ {
		<-held // the node's next poll waits for a change
		publishFile(t, dir, "routes.json", fmt.Sprintf(`{"version":%d}`, v))
		if got := <-applied; got != uint64(v) {
			t.Fatalf("applied %d, want %d", got, v)
		}
	}
	cancel()
	<-done
}

func TestListenRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:0", "[::]:0", "example.com:0"} {
		if _, err := cpserver.Listen(addr, t.TempDir()); !errors.Is(err, cpserver.ErrNotLoopback) {
			t.Errorf("Listen(%q) = %v, want ErrNotLoopback", addr, err)
		}
	}
}
