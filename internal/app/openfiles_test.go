package app

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/config"
)

// TestParseOpenFileLimit reads the soft limit of open files from
// /proc/<pid>/limits documents.
func TestParseOpenFileLimit(t *testing.T) {
	const head = "Limit                     Soft Limit           Hard Limit           Units     \n" +
		"Max cpu time              unlimited            unlimited            seconds   \n"
	tests := []struct {
		name    string
		doc     string
		want    uint64
		wantOK  bool
		wantErr bool
	}{
		{"soft below hard", head + "Max open files            1024                 524288               files     \n", 1024, true, false},
		{"raised to hard", head + "Max open files            20000                20000                files     \n", 20000, true, false},
		{"unlimited", head + "Max open files            unlimited            unlimited            files     \n", 0, false, false},
		{"no line", head, 0, false, true},
		{"malformed", head + "Max open files            many                 1024                 files     \n", 0, false, true},
		{"truncated", head + "Max open files            1024\n", 0, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := parseOpenFileLimit([]byte(tt.doc))
			if (err != nil) != tt.wantErr || got != tt.want || ok != tt.wantOK {
				t.Errorf("parseOpenFileLimit = %d, %v, %v; want %d, %v, error %v", got, ok, err, tt.want, tt.wantOK, tt.wantErr)
			}
		})
	}
}

// TestConcurrencyFor: the concurrency the open-file limit allows is the
// configured one when 2 descriptors per request and the reserve fit,
// else what fits; a limit that cannot serve one request is refused.
func TestConcurrencyFor(t *testing.T) {
	tests := []struct {
		name       string
		configured int
		files      uint64
		want       int
		wantErr    bool
	}{
		{"the shipped 10000 with room", 10000, 1 << 20, 10000, false},
		{"exactly enough", 10000, 2*10000 + descriptorReserve, 10000, false},
		{"one short", 10000, 2*10000 + descriptorReserve - 1, 9999, false},
		{"ulimit -n 1024", 10000, 1024, (1024 - descriptorReserve) / 2, false},
		{"a small setting fits a small limit", 100, 1024, 100, false},
		{"one request", 10000, descriptorReserve + 2, 1, false},
		{"not even one", 10000, descriptorReserve + 1, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := concurrencyFor(tt.configured, tt.files)
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Errorf("concurrencyFor(%d, %d) = %d, %v; want %d, error %v", tt.configured, tt.files, got, err, tt.want, tt.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "open-file limit") {
				t.Errorf("error %q does not name the open-file limit", err)
			}
		})
	}
}

// TestConcurrencyLimitWarns: a node whose open-file limit is too low for
// limits.max_concurrent_requests lowers its concurrency cap to what the
// limit allows, says so as a warning and on /readyz; one with room says
// nothing; an unknown limit is not checked; one that cannot serve a
// request refuses to start.
func TestConcurrencyLimitWarns(t *testing.T) {
	tests := []struct {
		name    string
		files   uint64
		known   bool
		want    int
		warn    bool
		wantErr bool
	}{
		{"room", 1 << 20, true, 10000, false, false},
		{"too low", 1024, true, 384, true, false},
		{"unknown", 0, false, 10000, false, false},
		{"cannot serve one", 100, true, 0, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			n := &node{
				cfg:    &config.Config{Limits: config.Limits{MaxConcurrentRequests: 10000}},
				o:      Options{OpenFileLimit: func() (uint64, bool) { return tt.files, tt.known }},
				log:    slog.New(slog.NewTextHandler(&logs, nil)),
				health: newHealth(),
			}
			got, err := n.concurrencyLimit()
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Fatalf("concurrencyLimit = %d, %v; want %d, error %v", got, err, tt.want, tt.wantErr)
			}
			detail := n.health.Ready().Details["open_files"]
			if !tt.warn {
				if logs.Len() != 0 || detail != "" {
					t.Errorf("logged %q, /readyz detail %q; want nothing", logs.String(), detail)
				}
				return
			}
			if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "effective=384") {
				t.Errorf("log %q: want a warning with effective=384", logs.String())
			}
			if !strings.Contains(detail, "open-file limit 1024 allows 384 concurrent requests") {
				t.Errorf("/readyz detail %q", detail)
			}
		})
	}
}

// TestOpenFileLimitLowersCap: a node started with the shipped
// limits.max_concurrent_requests (10 000) and an open-file limit that
// allows two requests sheds the third with its own fast 503 (safe to
// retry, nothing forwarded), reports the lowered limit on
// scootgate_client_max_concurrent_requests and says why on /readyz,
// still ready.
func TestOpenFileLimitLowersCap(t *testing.T) {
	s := startStack(t, stackOptions{openFiles: descriptorReserve + 2*descriptorsPerRequest})
	s.logs.mustContain(t, "open-file limit too low for limits.max_concurrent_requests")
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.api+"/v1/chat/completions",
				strings.NewReader(`{"model":"demo-gpt","messages":[{"role":"user","content":"[[hang]]"}]}`))
			req.Header.Set("Authorization", "Bearer "+clientKey)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	s.waitForProviderRequests(t, 2)
	r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), `{"model":"demo-gpt","messages":[{"role":"user","content":"hi"}]}`)
	if r.status != 503 || r.header.Get("Retry-After") != "1" || r.header.Get("X-Should-Retry") != "true" || !strings.Contains(r.body, "concurrent request limit") {
		t.Fatalf("third request: status %d Retry-After %q x-should-retry %q body %s; want the concurrency limit's 503",
			r.status, r.header.Get("Retry-After"), r.header.Get("X-Should-Retry"), r.body)
	}
	if n := s.prov.RequestCount(); n != 2 {
		t.Fatalf("provider saw %d requests, want only the 2 hung ones", n)
	}
	waitMetric(t, s, "scootgate_client_max_concurrent_requests 2", 5*time.Second)

	resp, err := http.Get(s.health + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep ReadyReport
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		t.Fatal(err)
	}
	if !rep.Ready || !strings.Contains(rep.Details["open_files"], "allows 2 concurrent requests") {
		t.Errorf("/readyz: %+v; want ready with the open_files detail", rep)
	}
}
