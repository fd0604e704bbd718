package app

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestCredentialFileRotates: the provider credential's file is replaced
// while requests are running; after the next check every new request
// carries the new key, none fails, and a later broken file keeps the new
// key in use, saying so in the log (docs/operations.md "Credentials").
func TestCredentialFileRotates(t *testing.T) {
	const oldKey, newKey = "sk-rotate-old-4b1d", "sk-rotate-new-77e2"
	dir := t.TempDir()
	path := filepath.Join(dir, "openai.key")
	writeKey(t, path, oldKey+"\n", 0)
	ticks := make(chan time.Time)
	s := startStack(t, stackOptions{credFile: path, credTicks: ticks, anyKey: true})

	const workers, each = 4, 20
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		failures []int
		checked  atomic.Bool
		late     = map[string]bool{} // requests started after the check; guarded by mu
	)
	midway := make(chan struct{})
	var once sync.Once
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				mark := fmt.Sprintf("w%d-%d", w, i)
				if checked.Load() {
					mu.Lock()
					late[mark] = true
					mu.Unlock()
				}
				body := `{"model":"demo-gpt","messages":[{"role":"user","content":"` + mark + `"}]}`
				r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), body)
				if r.status != 200 {
					mu.Lock()
					failures = append(failures, r.status)
					mu.Unlock()
				}
				if w == 0 && i == each/4 {
					once.Do(func() { close(midway) })
				}
			}
		})
	}
	<-midway // requests are running
	writeKey(t, path, newKey+"\n", 1)
	ticks <- time.Time{}
	s.events.waitFor(t, "credentials checked 1", 10*time.Second)
	checked.Store(true)
	wg.Wait()
	if len(failures) != 0 {
		t.Fatalf("%d requests failed during the rotation: %v", len(failures), failures)
	}
	reqs := s.prov.Requests()
	var sawOld, sawNew int
	for _, r := range reqs {
		switch r.Header.Get("Authorization") {
		case "Bearer " + oldKey:
			sawOld++
			for mark := range late {
				if strings.Contains(string(r.Body), `"`+mark+`"`) {
					t.Errorf("request %s, started after the check, carried the old key", mark)
				}
			}
		case "Bearer " + newKey:
			sawNew++
		default:
			t.Errorf("request %d carried neither key", r.Seq)
		}
	}
	if sawOld == 0 || sawNew == 0 || sawOld+sawNew != workers*each {
		t.Fatalf("old key %d, new key %d requests, want both and %d in all", sawOld, sawNew, workers*each)
	}

	// A rotation caught half-written: the new key stays in use.
	writeKey(t, path, "", 2)
	ticks <- time.Time{}
	s.events.waitFor(t, "credentials checked 2", 10*time.Second)
	s.logs.mustContain(t, "credential file could not be re-read; the previous value stays in use")
	if r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), chat); r.status != 200 {
		t.Fatalf("status %d after a failed re-read", r.status)
	}
	reqs = s.prov.Requests()
	if got := reqs[len(reqs)-1].Header.Get("Authorization"); got != "Bearer "+newKey {
		t.Fatal("a failed re-read changed the key in use")
	}
}

// writeKey writes a key file with a modification time n seconds after a
// fixed base, so that every rotation is seen whatever the file system's
// time resolution.
func writeKey(t *testing.T, path, v string, n int) {
	t.Helper()
	if err := os.WriteFile(path, []byte(v), 0o600); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 1, 0, 0, n, 0, time.UTC)
	if err := os.Chtimes(path, at, at); err != nil {
		t.Fatal(err)
	}
}

// TestAuthHeader: a credential's auth_header decides the one header that
// carries it to the provider; without it, the protocol's own.
func TestAuthHeader(t *testing.T) {
	creds := []string{"Authorization", "X-Api-Key", "Api-Key", "X-Goog-Api-Key"}
	for _, tt := range []struct {
		auth, header, value string
	}{
		{"", "Authorization", "Bearer " + openAIProvKey},
		{"bearer", "Authorization", "Bearer " + openAIProvKey},
		{"x-api-key", "X-Api-Key", openAIProvKey},
		{"api-key", "Api-Key", openAIProvKey},
		{"x-goog-api-key", "X-Goog-Api-Key", openAIProvKey},
	} {
		name := tt.auth
		if name == "" {
			name = "default" // a name the temporary directory can carry
		}
		t.Run(name, func(t *testing.T) {
			s := startStack(t, stackOptions{authHeader: tt.auth, anyKey: true})
			if r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), chat); r.status != 200 {
				t.Fatalf("status %d", r.status)
			}
			h := s.prov.Requests()[0].Header
			for _, name := range creds {
				want := ""
				if name == tt.header {
					want = tt.value
				}
				if got := h.Values(name); (want == "" && len(got) != 0) || (want != "" && (len(got) != 1 || got[0] != want)) {
					t.Errorf("%s: %d values, want only %q", name, len(got), want)
				}
			}
		})
	}
}
