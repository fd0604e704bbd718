package gateway

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/balance"
	"github.com/scootgate/scootgate/internal/config"
	"github.com/scootgate/scootgate/internal/devstack/fakeprovider"
	"github.com/scootgate/scootgate/internal/routes"
	"github.com/scootgate/scootgate/internal/upstream"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

type eventLog struct {
	mu  sync.Mutex
	evs []usageevent.Event
}

func (l *eventLog) Record(ev *usageevent.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evs = append(l.evs, *ev)
}

func (l *eventLog) last() usageevent.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.evs[len(l.evs)-1]
}

// TestAffinityPlacement: through the request path, every turn of a
// session lands on one of a pool's backends (the body's session member or
// an agent client's session header), the usage event and the log line say
// so, the key never reaches either, a request without a key is keyless,
// and a model with affinity = false balances.
func TestAffinityPlacement(t *testing.T) {
	prov := fakeprovider.New(fakeprovider.Options{})
	base, err := prov.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer prov.Close()
	var doc strings.Builder
	doc.WriteString("node_id = \"n\"\n[[egress.proxies]]\nname = \"p\"\nurl = \"socks5://127.0.0.1:1080\"\n[credentials.c]\nenv = \"K\"\nhosts = [\"127.0.0.1\"]\n[authz]\nsource = \"file:/dev/null\"\n")
	for i := range 5 {
		fmt.Fprintf(&doc, "[backends.b%d]\nprotocol = \"openai\"\nbase_url = %q\ncredential = \"c\"\nmax_inflight_per_node = 100\nendpoints = [\"chat_completions\", \"responses\"]\n", i, base)
	}
	for i := range 5 {
		fmt.Fprintf(&doc, "[backends.g%d]\nprotocol = \"gemini\"\nbase_url = %q\ncredential = \"c\"\nmax_inflight_per_node = 100\nendpoints = [\"generate_content\", \"stream_generate_content\"]\n", i, strings.TrimSuffix(base, "/v1")+"/v1beta")
	}
	doc.WriteString("[models.gpool]\n")
	for i := range 5 {
		fmt.Fprintf(&doc, "[[models.gpool.targets]]\nbackend = \"g%d\"\nmodel = \"m\"\nweight = 1\nstream = true\n", i)
	}
	for _, m := range []string{"pool", "plain", "ppool"} {
		fmt.Fprintf(&doc, "[models.%s]\n", m)
		if m == "plain" {
			doc.WriteString("affinity = false\n")
		}
		if m == "ppool" {
			doc.WriteString("prefix_affinity = true\n")
		}
		for i := range 5 {
			fmt.Fprintf(&doc, "[[models.%s.targets]]\nbackend = \"b%d\"\nmodel = \"m\"\nweight = 1\n", m, i)
		}
	}
	cfg, err := config.Parse([]byte(doc.String()), func(string) (string, bool) { return "provider-key", true }, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	tab, err := routes.Compile(cfg.Backends, cfg.Models, cfg.Credentials, upstream.NewRegistry(upstream.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	var holder routes.Holder
	holder.Store(tab)
	var logs bytes.Buffer
	var logMu sync.Mutex
	events := &eventLog{}
	h := New(Options{
		Auth: allowAll{}, Routes: &holder, Transport: &http.Transport{},
		Picker:    &balance.Affinity{Fallback: &balance.WeightedRandom{}},
		Recorders: []Recorder{events},
		BodyLimit: 1 << 20, FirstByte: 5 * time.Second, StreamIdle: 5 * time.Second, NonStreamTotal: 5 * time.Second,
		MaxAttempts: 2,
		Logger:      slog.New(slog.NewJSONHandler(lockedWriter{&logs, &logMu}, nil)),
	})
	srv := httptest.NewServer(h)
	defer srv.Close()

	post := func(path, body string, hdr ...string) usageevent.Event {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: status %d", path, resp.StatusCode)
		}
		return events.last()
	}
	chat := func(model, extra string) string {
		return `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]` + extra + `}`
	}

	cases := []struct {
		name string
		send func(session string) usageevent.Event
	}{
		{"prompt_cache_key", func(s string) usageevent.Event {
			return post("/v1/chat/completions", chat("pool", `,"prompt_cache_key":"`+s+`"`))
		}},
		{"responses prompt_cache_key", func(s string) usageevent.Event {
			return post("/v1/responses", `{"model":"pool","input":"hi","prompt_cache_key":"`+s+`"}`)
		}},
		{"Codex Session-Id header", func(s string) usageevent.Event {
			return post("/v1/responses", `{"model":"pool","input":"hi"}`, "Session-Id", s)
		}},
		{"opencode X-Session-Affinity header on chat", func(s string) usageevent.Event {
			return post("/v1/chat/completions", chat("pool", ""), "X-Session-Affinity", s)
		}},
		{"opencode X-Session-Id header on chat", func(s string) usageevent.Event {
			return post("/v1/chat/completions", chat("pool", ""), "X-Session-Id", s)
		}},
		{"Gemini CLI installation id", func(s string) usageevent.Event {
			return post("/v1beta/models/gpool:generateContent", `{"contents":[{"parts":[{"text":"hi"}]}]}`, "X-Gemini-Api-Privileged-User-Id", s)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			backends := map[string]bool{}
			for s := range 20 {
				session := fmt.Sprintf("secret-session-%d", s)
				first := tc.send(session)
				for range 3 {
					ev := tc.send(session)
					if ev.Backend != first.Backend || ev.Placement != usageevent.PlacementAffinity {
						t.Fatalf("session %d: %s (%s), first turn on %s", s, ev.Backend, ev.Placement, first.Backend)
					}
				}
				backends[first.Backend] = true
			}
			if len(backends) < 3 {
				t.Errorf("20 sessions used only %d of 5 backends", len(backends))
			}
		})
	}

	t.Run("prefix affinity", func(t *testing.T) {
		// Keyless turns of one conversation (system prompt, first user
		// turn, then a growing history) stay on one backend; different
		// first turns spread; a named session still wins.
		backends := map[string]bool{}
		for s := range 20 {
			head := fmt.Sprintf(`{"role":"system","content":"agent"},{"role":"user","content":"task %d"}`, s)
			turn := func(extra string) usageevent.Event {
				return post("/v1/chat/completions", `{"model":"ppool","messages":[`+head+extra+`]}`)
			}
			first := turn("")
			if first.Placement != usageevent.PlacementPrefix {
				t.Fatalf("conversation %d: placement %q, want prefix", s, first.Placement)
			}
			for i := range 3 {
				ev := turn(strings.Repeat(`,{"role":"assistant","content":"ok"},{"role":"user","content":"more"}`, i+1))
				if ev.Backend != first.Backend || ev.Placement != usageevent.PlacementPrefix {
					t.Fatalf("conversation %d turn %d: %s (%s), first turn on %s", s, i+2, ev.Backend, ev.Placement, first.Backend)
				}
			}
			backends[first.Backend] = true
		}
		if len(backends) < 3 {
			t.Errorf("20 conversations used only %d of 5 backends", len(backends))
		}
		if ev := post("/v1/chat/completions", chat("ppool", `,"prompt_cache_key":"secret-session-9"`)); ev.Placement != usageevent.PlacementAffinity {
			t.Errorf("a named session on a prefix model: placement %q, want affinity", ev.Placement)
		}
		if ev := post("/v1/chat/completions", `{"model":"ppool","messages":[]}`); ev.Placement != usageevent.PlacementKeyless {
			t.Errorf("no turn: placement %q, want keyless", ev.Placement)
		}
	})

	if ev := post("/v1/chat/completions", chat("pool", "")); ev.Placement != usageevent.PlacementKeyless {
		t.Errorf("no session: placement %q, want keyless", ev.Placement)
	}
	if ev := post("/v1/chat/completions", chat("plain", `,"prompt_cache_key":"secret-session-1"`)); ev.Placement != usageevent.PlacementBalanced {
		t.Errorf("affinity = false: placement %q, want balanced", ev.Placement)
	}

	logMu.Lock()
	defer logMu.Unlock()
	if strings.Contains(logs.String(), "secret-session") {
		t.Fatal("a session key reached the log")
	}
	if !strings.Contains(logs.String(), `"placement":"affinity","session":"`) {
		t.Fatalf("log lines name no placement and session hash:\n%.2000s", logs.String())
	}
	for _, ev := range events.evs {
		if fmt.Sprintf("%+v", ev) != strings.ReplaceAll(fmt.Sprintf("%+v", ev), "secret-session", "") {
			t.Fatal("a session key reached a usage event")
		}
	}
}

type lockedWriter struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
