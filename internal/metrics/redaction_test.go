package metrics_test

import (
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/clock"
	"github.com/scootgate/scootgate/internal/egress"
	"github.com/scootgate/scootgate/internal/metrics"
	"github.com/scootgate/scootgate/internal/outbox"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/snapshot"
	"github.com/scootgate/scootgate/internal/upstream"
	"github.com/scootgate/scootgate/internal/usage"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// canaries are strings that must never appear in the exposition: a raw
// key, a URL (with a secret in its query), an error text.
var canaries = []string{"sk-canary", "://", "secret-body"}

// fullMetrics builds every family, with representative values and with
// hostile strings wherever a caller could pass one: raw keys and URLs as
// ids, values outside the typed sets as endpoint, outcome, stage and send
// state; error texts, URLs and paths in every Stats field that holds text.
func fullMetrics(t *testing.T) (*metrics.Metrics, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(time.Time{})
	m := metrics.New(metrics.Options{Clock: clk.Now, Version: "1.2.3 sk-canary"})

	m.ObserveModels(200, time.Second)
	for _, ep := range []provider.Endpoint{provider.Chat, provider.Messages, provider.Endpoint(200)} {
		for _, st := range []provider.SendState{provider.NotSent, provider.PossiblySent, provider.ResponseReceived, provider.NoAttempt, provider.SendState(200)} {
			m.ObserveRequest(ep, 200, st, time.Second, true)
			m.ObserveRequest(ep, 502, st, time.Second, false)
		}
	}
	m.ObserveRequest(provider.Messages, 1000, provider.PossiblySent, time.Second, false)

	for o := upstream.Outcome(0); o.String() != "unknown"; o++ {
		m.ObserveAttempt("openai-a", "azure", o, time.Second)
	}
	m.ObserveAttempt("openai-a", "sk-canary", upstream.Outcome(201), time.Second)
	m.ObserveAttempt("https://api.example.com/v1?key=sk-canary", "openai", upstream.Success, time.Second)
	m.ObserveAttempt("Bearer sk-canary", "https://x.openai.azure.com", upstream.Success, time.Second)

	m.ObserveLimitRefusal("key", "requests")
	m.ObserveLimitRefusal("tenant", "concurrency")
	m.ObserveLimitRefusal("k_sk-canary", "requests") // not a scope: not counted
	m.ObserveLimitRefusal("key", "sk-canary")
	m.ObserveFallback("gpt-4o", "gpt-4o-mini", "at_cap")
	m.ObserveFallback("gpt-4o", "gpt-4o-mini", "sk-canary") // not a reason: not counted
	m.ObserveEgressError("socks-1", egress.StageProxyDial)
	m.ObserveEgressError("socks5://user:sk-canary@127.0.0.1:1080", egress.StageProxyAuth)
	m.ObserveEgressError("socks-1", egress.Stage(99))

	reg := newRegistry(clk, true)
	st := reg.Get(identity("openai-a", 4))
	mustAcquire(t, st)
	st2 := reg.Get(identity("anthropic-b", 1))
	mustAcquire(t, st2)
	st2.Finish(upstream.Result{Outcome: upstream.TransportFailure})
	st3 := reg.Get(identity("openai-c", 4))
	mustAcquire(t, st3)
	st3.Finish(upstream.Result{Outcome: upstream.Success, Headroom: upstream.Headroom{
		Requests:  upstream.Budget{Stated: true, Limit: 100, Remaining: 0, Reset: time.Minute},
		Tokens:    upstream.Budget{Stated: true, Limit: 1000, Remaining: 400, Reset: time.Minute},
		Malformed: 1,
	}})
	m.RegisterBackends(metrics.RegistryBackends(reg, nil))
	m.RegisterCredentials(func() metrics.CredentialStats { return metrics.CredentialStats{Changed: 1, Failed: 1} })

	m.RegisterSnapshot(metrics.SnapshotAuthz, func() snapshot.Status {
		return snapshot.Status{
			Version: 3, LastSuccess: clk.Now().Add(-time.Minute), Rejections: 1, FetchErrors: 2, Stale: true,
			LastError:    `get "https://cp.example/authz?token=sk-canary": secret-body`,
			PersistError: "open /var/lib/sk-canary: permission denied",
			StaleReason:  "last error: https://cp.example sk-canary",
		}
	})
	m.RegisterSnapshot(metrics.SnapshotRoutes, func() snapshot.Status { return snapshot.Status{Version: 9, LastSuccess: clk.Now()} })
	m.RegisterSnapshot("file:///etc/sk-canary", func() snapshot.Status { return snapshot.Status{} })
	m.RegisterOutbox(func() outbox.Stats {
		return outbox.Stats{Depth: 1, Bytes: 10, OldestAge: time.Second, Appended: 1, Quarantined: "/data/sk-canary.corrupt"}
	})
	m.RegisterMQTT(func() metrics.MQTTStats { return metrics.MQTTStats{Connected: true, Published: 1, Acked: 1} })
	m.RegisterUsage(func() usage.RecorderStats { return usage.RecorderStats{Recorded: 1} })
	m.RegisterHealth(func() bool { return true }, func() bool { return false })
	m.RegisterLimitsStore(func() bool { return true }, func() int64 { return 3 })
	m.RegisterUsageEvents(func() bool { return true })
	m.RegisterTokens(func() []metrics.TokenCredential { return []metrics.TokenCredential{{Name: "entra", State: "ok"}} })
	m.RegisterClient(func() metrics.ClientStats { return metrics.ClientStats{InFlight: 3, Limit: 10, Refused: 1} })
	m.InitEgress("socks-2", "http://sk-canary@proxy")
	m.RegisterTraces(func() metrics.TraceStats { return metrics.TraceStats{Exported: 3, Failed: 1} })
	m.Record(&usageevent.Event{PublicModel: "gpt-4o", Backend: "openai-a", HTTPStatus: 200, Stream: true,
		SendState: usageevent.SendResponseReceived, RequestBytes: 1, ResponseBytes: 1, TTFBMs: 1, DurationMs: 1,
		Usage: &usageevent.Usage{InputTokens: 1}, Cost: &usageevent.Cost{USD: "0.5"}})
	m.Record(&usageevent.Event{PublicModel: "x\nsk-canary", Backend: "https://sk-canary", HTTPStatus: 1000, Placement: "session sk-canary"})
	m.Record(&usageevent.Event{PublicModel: "gpt-4o", Backend: "openai-a", HTTPStatus: 200, Placement: "affinity"})
	return m, clk
}

// TestNoSecretsInExposition scrapes every family over a real socket and
// greps the whole text for the canaries (no label ever carries a
// key, a digest preimage, a URL or a body).
func TestNoSecretsInExposition(t *testing.T) {
	m, _ := fullMetrics(t)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	body := scrape(t, srv.URL)
	if !strings.Contains(body, "scootgate_snapshot_stale") || !strings.Contains(body, "scootgate_mqtt_connected") {
		t.Fatal("exposition is missing families; the test would prove nothing")
	}
	for _, c := range canaries {
		if strings.Contains(body, c) {
			for line := range strings.Lines(body) {
				if strings.Contains(line, c) {
					t.Errorf("exposition contains %q: %s", c, strings.TrimSpace(line))
				}
			}
		}
	}
}

var idShape = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// TestLabelSetsClosed gathers every family and checks that each label's
// values come from its closed set, or have the config id shape.
func TestLabelSetsClosed(t *testing.T) {
	m, _ := fullMetrics(t)
	outcomes := []string{"unknown"}
	for o := upstream.Outcome(0); o.String() != "unknown"; o++ {
		outcomes = append(outcomes, o.String())
	}
	sets := map[string][]string{
		"endpoint": {"chat_completions", "messages", "responses", "embeddings", "count_tokens",
			"generate_content", "stream_generate_content", "gemini_count_tokens", "embed_content", "batch_embed_contents", "responses_compact", "responses_input_tokens", "completions", "rerank", "audio_speech",
			"audio_transcriptions", "audio_translations", "image_generations", "image_edits", "realtime", "bidi_generate_content", "converse", "converse_stream", "models", "unknown"},
		"send_state": {"definitely_not_sent", "possibly_sent", "response_received", "none", "unknown"},
		"stream":     {"true", "false"},
		"outcome":    outcomes,
		"stage":      {"proxy_dial", "proxy_auth", "proxy_tls", "proxy_policy", "target", "provider_tls", "unknown"},
		"reason": {"full", "queue", "not_sent", "failing", "closed", "cooldown", "headroom",
			"endpoint", "capability", "context", "at_cap", "unavailable"}, // the last: fallbacks
		"result":    {"recorded", "dropped", "oversize", "invalid", "over_key_budget", "exported", "failed", "changed"},
		"budget":    {"requests", "tokens"},
		"class":     {"2xx", "3xx", "4xx", "5xx", "none"},
		"placement": {"balanced", "keyless", "affinity", "spill_overloaded", "spill_unavailable", "spill_retry", "unknown"},
		"platform":  {"openai", "anthropic", "google", "bedrock", "vertex", "azure", "unknown"},
		"scope":     {"key", "tenant"},
		"state":     {"ok", "pending", "refresh_failing", "expired"},
		"type":      {"input", "output", "cache_read", "cache_write", "reasoning"},
		"le":        nil, // histogram buckets: numbers
	}
	ids := map[string]bool{"backend": true, "proxy": true, "kind": true, "credential": true}
	versions := map[string]bool{"version": true, "revision": true, "goversion": true}
	versionShape := regexp.MustCompile(`^[A-Za-z0-9._+-]{1,128}$`)
	code := regexp.MustCompile(`^([1-5][0-9][0-9]|unknown)$`)

	mfs, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "scootgate_") {
			continue
		}
		for _, mt := range mf.GetMetric() {
			for _, lp := range mt.GetLabel() {
				name, val := lp.GetName(), lp.GetValue()
				seen[name] = true
				switch set, closed := sets[name]; {
				case name == "code":
					if !code.MatchString(val) {
						t.Errorf("%s: code=%q", mf.GetName(), val)
					}
				case ids[name]:
					if !idShape.MatchString(val) {
						t.Errorf("%s: %s=%q is not id-shaped", mf.GetName(), name, val)
					}
				case name == "from" || name == "to":
					// Model entries of the routes that a chain joins.
					if val != "gpt-4o" && val != "gpt-4o-mini" {
						t.Errorf("%s: %s=%q", mf.GetName(), name, val)
					}
				case name == "model":
					// Public model names (operator config, matched by the
					// routing table), or invalid / _other.
					if val != "gpt-4o" && val != "invalid" && val != "_other" {
						t.Errorf("%s: model=%q", mf.GetName(), val)
					}
				case versions[name]:
					if !versionShape.MatchString(val) {
						t.Errorf("%s: %s=%q is not version-shaped", mf.GetName(), name, val)
					}
				case closed:
					if set != nil && !slices.Contains(set, val) {
						t.Errorf("%s: %s=%q outside its closed set", mf.GetName(), name, val)
					}
				default:
					t.Errorf("%s: label %q has no declared set", mf.GetName(), name)
				}
			}
		}
	}
	// The hostile inputs above must have been mapped, not dropped.
	for _, name := range []string{"endpoint", "code", "send_state", "stream", "backend", "outcome", "proxy", "stage", "kind", "reason", "result", "model", "class", "type", "scope", "from", "to"} {
		if !seen[name] {
			t.Errorf("no series with label %q; fullMetrics does not cover it", name)
		}
	}
}

// TestDocListsEveryFamily keeps doc.go and the code in step: every
// scootgate_* family exported is documented, and every documented one is
// exported when all sources are registered.
func TestDocListsEveryFamily(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, n := range regexp.MustCompile(`\bscootgate_[a-z_]+[a-z]`).FindAllString(string(doc), -1) {
		documented[n] = true
	}
	m, _ := fullMetrics(t)
	mfs, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, mf := range mfs {
		if n := mf.GetName(); strings.HasPrefix(n, "scootgate_") {
			exported[n] = true
			if !documented[n] {
				t.Errorf("%s is not documented in doc.go", n)
			}
		}
	}
	for n := range documented {
		if !exported[n] {
			t.Errorf("doc.go documents %s, which is not exported", n)
		}
	}
	if len(exported) < 30 {
		t.Errorf("only %d families exported; fullMetrics is incomplete", len(exported))
	}
}
