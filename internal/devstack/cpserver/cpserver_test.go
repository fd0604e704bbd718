package cpserver_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/devstack/cpserver"
	"github.com/scootgate/scootgate/internal/snapshot"
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
		{"query ignored", "GET", "/routes.json?wait=30", []string{`"7"`}, result{304, `"7"`, ""}},
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

func TestListenRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:0", "[::]:0", "example.com:0"} {
		if _, err := cpserver.Listen(addr, t.TempDir()); !errors.Is(err, cpserver.ErrNotLoopback) {
			t.Errorf("Listen(%q) = %v, want ErrNotLoopback", addr, err)
		}
	}
}
