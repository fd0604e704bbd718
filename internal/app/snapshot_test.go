package app

import (
	"bufio"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/devstack/cpserver"
	"github.com/scootgate/scootgate/internal/devstack/fakeprovider"
	"github.com/scootgate/scootgate/pkg/authsnap"
	"github.com/scootgate/scootgate/pkg/routesnap"
	"github.com/scootgate/scootgate/pkg/snapsign"
)

// Control-plane tests: a node whose routes and keys come
// from snapshots served over HTTP by cpserver, the dev control plane.

// The fastest schedule the config allows: polls every second, stale after
// three silent seconds (stale_after ≥ 3 × poll_interval).
const fastPolls = "poll_interval = \"1s\"\nstale_after = \"3s\""

// controlPlaneServer serves the documents that publish writes into dir.
type controlPlaneServer struct {
	t   *testing.T
	dir string
	srv *cpserver.Server
}

func startControlPlane(t *testing.T) *controlPlaneServer {
	t.Helper()
	cp := &controlPlaneServer{t: t, dir: t.TempDir()}
	cp.listen("127.0.0.1:0")
	return cp
}

// listen (re)starts the server on addr; stop with close.
func (cp *controlPlaneServer) listen(addr string) {
	cp.t.Helper()
	srv, err := cpserver.Listen(addr, cp.dir)
	if err != nil {
		cp.t.Fatal(err)
	}
	cp.srv = srv
	cp.t.Cleanup(func() { srv.Close() })
}

func (cp *controlPlaneServer) close() {
	if err := cp.srv.Close(); err != nil {
		cp.t.Error(err)
	}
}

// publish replaces a document atomically, as a control plane must.
func (cp *controlPlaneServer) publish(name string, doc any) {
	cp.t.Helper()
	data, err := json.Marshal(doc)
	if err != nil {
		cp.t.Fatal(err)
	}
	tmp := filepath.Join(cp.dir, name+".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		cp.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(cp.dir, name)); err != nil {
		cp.t.Fatal(err)
	}
}

// gptRoutes is a routing snapshot in which demo-gpt goes to one OpenAI
// backend.
func gptRoutes(version uint64, backendID, baseURL string) routesnap.Snapshot {
	return routesnap.Snapshot{
		Schema: routesnap.Schema, Version: version,
		Backends: []routesnap.Backend{{
			ID: backendID, Protocol: routesnap.ProtocolOpenAI, BaseURL: baseURL, Credential: "oa", MaxInflightPerNode: 256,
		}},
		Models: []routesnap.Model{{Name: openAIModel, Targets: []routesnap.Target{
			{Backend: backendID, Model: openAIProvModel, Weight: 1, Stream: true, Tools: true},
		}}},
	}
}

func authzDoc(version uint64, keys ...authsnap.Key) authsnap.Snapshot {
	return authsnap.Snapshot{Schema: authsnap.Schema, Version: version, Keys: keys}
}

var (
	keyFull    = authsnap.Key{KeyID: "k-full", TenantID: "t-1", Digest: authsnap.Digest(clientKey)}
	keyLimited = authsnap.Key{KeyID: "k-limited", TenantID: "t-2", Digest: authsnap.Digest(limitedKey), Models: []string{anthropicModel}}
)

func startProvider(t *testing.T) (*fakeprovider.Provider, string) {
	t.Helper()
	p := fakeprovider.New(fakeprovider.Options{OpenAIKey: openAIProvKey, AnthropicKey: anthropProvKey})
	u, err := p.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, u
}

// applied is the event of a document the node swapped in.
func applied(kind string, version uint64) string {
	return fmt.Sprintf("snapshot %s applied %d", kind, version)
}

// readyz returns /readyz's status and report.
func (s *stack) readyz() (int, ReadyReport) {
	s.t.Helper()
	resp, err := http.Get(s.health + "/readyz")
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep ReadyReport
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		s.t.Fatal(err)
	}
	return resp.StatusCode, rep
}

// waitReadyz polls /readyz until done accepts its answer, or fails the
// test after d. Readiness flips on a clock (stale_after), not on an event
// a test could wait for.
func (s *stack) waitReadyz(what string, d time.Duration, done func(code int, rep ReadyReport) bool) {
	s.t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		code, rep := s.readyz()
		if done(code, rep) {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("/readyz not %s after %v: %d %+v", what, d, code, rep)
		}
		<-tick.C
	}
}

// gatedProvider is an OpenAI-protocol provider whose streams send their
// first chunk, then hold until release, then finish with [DONE].
type gatedProvider struct {
	url      string        // base URL, ".../v1"
	started  chan struct{} // one value per stream whose first chunk is out
	requests atomic.Int64
	gate     chan struct{}
	once     sync.Once
}

func startGatedProvider(t *testing.T, streams int) *gatedProvider {
	t.Helper()
	g := &gatedProvider{started: make(chan struct{}, streams), gate: make(chan struct{})}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	t.Cleanup(g.release) // runs first: lets held handlers end so Close does not wait
	g.url = srv.URL + "/v1"
	return g
}

func (g *gatedProvider) release() { g.once.Do(func() { close(g.gate) }) }

func (g *gatedProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.requests.Add(1)
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "text/event-stream")
	rc := http.NewResponseController(w)
	chunk := func(delta, finish string) {
		fmt.Fprintf(w, `data: {"id":"chatcmpl-gated","object":"chat.completion.chunk","created":1,"model":%q,"choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`+"\n\n",
			openAIProvModel, delta, finish)
		_ = rc.Flush()
	}
	chunk(`{"role":"assistant","content":"old "}`, "null")
	g.started <- struct{}{}
	select {
	case <-g.gate:
	case <-r.Context().Done():
		return
	}
	chunk(`{"content":"table"}`, `"stop"`)
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// TestRoutesSwapUnderInFlightStreams: a routing snapshot
// that removes the backend 100 live streams are using is swapped in. The
// streams finish on the table they started with (docs/snapshots.md: a request pins
// its table), and every new request goes to the new backend.
func TestRoutesSwapUnderInFlightStreams(t *testing.T) {
	const streams = 100
	old := startGatedProvider(t, streams)
	fresh, freshURL := startProvider(t)
	cp := startControlPlane(t)
	cp.publish("routes.json", gptRoutes(1, "oa-old", old.url))
	s := startStack(t, stackOptions{routesSource: cp.srv.URL(cpserver.RoutesPath), controlPlane: fastPolls})

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: streams}}
	defer client.CloseIdleConnections()
	type result struct {
		body string
		err  error
	}
	results := make(chan result, streams)
	for range streams {
		go func() {
			body, err := streamAcrossSwap(s, client)
			results <- result{body, err}
		}()
	}
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for i := range streams {
		select {
		case <-old.started:
		case r := <-results:
			t.Fatalf("stream %d ended before the swap: %v\n%s", i, r.err, r.body)
		case <-timeout.C:
			t.Fatalf("only %d of %d streams reached the old backend", i, streams)
		}
	}

	cp.publish("routes.json", gptRoutes(2, "oa-new", freshURL))
	s.events.waitFor(t, applied("routes", 2), 5*time.Second)

	const newRequests = 10
	for i := range newRequests {
		body, want := chat, "echo: hi"
		if i%2 == 1 {
			body, want = `{"model":"demo-gpt","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "data: [DONE]"
		}
		if r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), body); r.status != 200 || !strings.Contains(r.body, want) {
			t.Fatalf("request %d after the swap: status %d body %s", i, r.status, r.body)
		}
	}
	if n := fresh.RequestCount(); n != newRequests {
		t.Errorf("new backend got %d requests, want %d", n, newRequests)
	}

	old.release()
	for range streams {
		r := <-results
		if r.err != nil {
			t.Fatalf("in-flight stream: %v\n%s", r.err, r.body)
		}
		if !strings.Contains(r.body, `"content":"table"`) || !strings.HasSuffix(r.body, "data: [DONE]\n\n") {
			t.Fatalf("in-flight stream did not finish on the old backend:\n%s", r.body)
		}
	}
	if n := old.requests.Load(); n != streams {
		t.Errorf("removed backend got %d requests, want exactly the %d streams from before the swap", n, streams)
	}
}

// streamAcrossSwap starts a stream, reads its first event, and then the
// rest to the end. The body read so far comes back with any error.
func streamAcrossSwap(s *stack, client *http.Client) (string, error) {
	req, err := http.NewRequestWithContext(s.t.Context(), http.MethodPost, s.api+"/v1/chat/completions",
		strings.NewReader(`{"model":"demo-gpt","stream":true,"messages":[{"role":"user","content":"hold"}]}`))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+clientKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		data, _ := io.ReadAll(resp.Body)
		return string(data), fmt.Errorf("status %d", resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	var b strings.Builder
	for { // the first event ends with an empty line
		line, err := br.ReadString('\n')
		b.WriteString(line)
		if err != nil {
			return b.String(), fmt.Errorf("before the first event ended: %w", err)
		}
		if line == "\n" {
			break
		}
	}
	rest, err := io.ReadAll(br)
	b.Write(rest)
	return b.String(), err
}

// TestRestartDuringControlPlaneOutage checks staleness across a restart
// (docs/snapshots.md "Last good copy"): a node that loaded its
// documents stops; the control plane goes down; a new node on the same
// state directory serves from the persisted copies and is ready until
// stale_after, then unready while still serving, then ready again once
// the control plane is back.
func TestRestartDuringControlPlaneOutage(t *testing.T) {
	_, provURL := startProvider(t)
	cp := startControlPlane(t)
	cp.publish("routes.json", gptRoutes(1, "oa", provURL))
	cp.publish("authz.json", authzDoc(1, keyFull))
	opts := stackOptions{
		routesSource: cp.srv.URL(cpserver.RoutesPath),
		authzSource:  cp.srv.URL(cpserver.AuthzPath),
		stateDir:     t.TempDir(),
		controlPlane: fastPolls,
	}

	first := startStack(t, opts)
	if code, rep := first.readyz(); code != 200 {
		t.Fatalf("first node: /readyz %d %+v", code, rep)
	}
	if r := first.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), chat); r.status != 200 {
		t.Fatalf("first node: status %d body %s", r.status, r.body)
	}
	first.shutdown()
	addr := cp.srv.Addr()
	cp.close()

	second := startStack(t, opts)
	second.events.waitFor(t, applied("routes", 1)+" from disk", 0)
	second.events.waitFor(t, applied("authz", 1)+" from disk", 0)
	if r := second.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), chat); r.status != 200 {
		t.Fatalf("restarted node, control plane down: status %d body %s", r.status, r.body)
	}
	if code, rep := second.readyz(); code != 200 {
		t.Fatalf("restarted node before stale_after: /readyz %d %+v, want 200", code, rep)
	}
	// The first poll ran before the listeners: a node that serves its
	// restored copies has not failed to load them.
	if logs := second.logs.String(); strings.Contains(logs, "not loaded at start") {
		t.Fatalf("restarted node logs a load failure for documents it restored:\n%s", logs)
	}

	// Each poller goes stale stale_after after its own last contact.
	second.waitReadyz("503, routes and authz stale", 6*time.Second, func(code int, rep ReadyReport) bool {
		return code == 503 && strings.Contains(rep.Reasons["routes"], "stale") && strings.Contains(rep.Reasons["authz"], "stale")
	})
	if r := second.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), chat); r.status != 200 {
		t.Fatalf("stale node must keep serving: status %d body %s", r.status, r.body)
	}

	cp.listen(addr)
	second.waitReadyz("200", 5*time.Second, func(code int, _ ReadyReport) bool { return code == 200 })
}

// TestAuthzKeyRemoved: a key removed in a new
// authorization snapshot is rejected after the swap, the others keep
// working; a later snapshot with a malformed digest is rejected whole.
func TestAuthzKeyRemoved(t *testing.T) {
	cp := startControlPlane(t)
	cp.publish("authz.json", authzDoc(1, keyFull, keyLimited))
	s := startStack(t, stackOptions{authzSource: cp.srv.URL(cpserver.AuthzPath), controlPlane: fastPolls})
	const claude = `{"model":"demo-claude","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`
	anth := func(key string) map[string]string {
		return map[string]string{"x-api-key": key, "anthropic-version": "2023-06-01"}
	}
	status := func(key string) int {
		if key == clientKey {
			return s.do(http.MethodPost, "/v1/chat/completions", bearer(key), chat).status
		}
		return s.do(http.MethodPost, "/v1/messages", anth(key), claude).status
	}
	if a, b := status(clientKey), status(limitedKey); a != 200 || b != 200 {
		t.Fatalf("before the swap: full key %d, limited key %d; want 200 200", a, b)
	}

	cp.publish("authz.json", authzDoc(2, keyLimited))
	s.events.waitFor(t, applied("authz", 2), 5*time.Second)
	if a, b := status(clientKey), status(limitedKey); a != 401 || b != 200 {
		t.Fatalf("after removing k-full: full key %d, limited key %d; want 401 200", a, b)
	}

	// Version 3 would restore k-full, but another key's digest is
	// malformed: nothing of it applies.
	bad := authsnap.Key{KeyID: "k-bad", TenantID: "t-3", Digest: strings.Repeat("z", authsnap.DigestLength)}
	cp.publish("authz.json", authzDoc(3, keyLimited, keyFull, bad))
	s.events.waitFor(t, "snapshot authz rejected", 5*time.Second)
	if a, b := status(clientKey), status(limitedKey); a != 401 || b != 200 {
		t.Fatalf("after a malformed snapshot: full key %d, limited key %d; want 401 200", a, b)
	}
}

// TestNewerRoutesReenableDisabledBackend: a backend disabled by a provider
// 401 comes back when a newer routing snapshot still lists it (the
// operator fixed the credential behind the same name), and not before.
// Before, only a changed definition or a restart brought it back, so one
// tenant's request that provoked a 401 took the backend from every tenant.
func TestNewerRoutesReenableDisabledBackend(t *testing.T) {
	var refuse atomic.Bool
	refuse.Store(true)
	prov := fakeprovider.New(fakeprovider.Options{OpenAIKey: openAIProvKey, Script: func(fakeprovider.Request) *fakeprovider.Behaviour {
		if refuse.Load() {
			return &fakeprovider.Behaviour{Status: http.StatusUnauthorized}
		}
		return nil
	}})
	provURL, err := prov.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prov.Close() })
	cp := startControlPlane(t)
	cp.publish("routes.json", gptRoutes(1, "oa", provURL))
	s := startStack(t, stackOptions{routesSource: cp.srv.URL(cpserver.RoutesPath), controlPlane: fastPolls})

	if r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), chat); r.status != http.StatusBadGateway {
		t.Fatalf("status %d on the provider's 401, want 502", r.status)
	}
	refuse.Store(false) // the credential is fixed; the node does not know yet
	r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), chat)
	if r.status != http.StatusServiceUnavailable {
		t.Fatalf("status %d while disabled, want 503", r.status)
	}
	if got, want := r.header.Get("Retry-After"), "600"; got != want {
		t.Errorf("Retry-After %q while disabled, want %q: the probe is due after cooldown.disabled_probe (10m)", got, want)
	}
	cp.publish("routes.json", gptRoutes(2, "oa", provURL))
	s.events.waitFor(t, applied("routes", 2), 10*time.Second)
	if r := s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), chat); r.status != http.StatusOK {
		t.Fatalf("status %d after a newer snapshot still listing the backend, want 200: %s", r.status, r.body)
	}
	if n := prov.RequestCount(); n != 2 {
		t.Fatalf("provider saw %d requests, want the 401 and the one after the snapshot", n)
	}
}

// publishSigned replaces a document atomically with a DSSE envelope of
// it, signed by key (none: an envelope without signatures).
func (cp *controlPlaneServer) publishSigned(name, payloadType string, doc any, keys ...ed25519.PrivateKey) {
	cp.t.Helper()
	data, err := json.Marshal(doc)
	if err != nil {
		cp.t.Fatal(err)
	}
	cp.publish(name, json.RawMessage(snapsign.Sign(payloadType, data, keys...).Marshal()))
}

// TestSignedAuthz: a node with verify_keys serves a signed authorization
// snapshot from the long-polling dev control plane, applies a signed
// revocation, and refuses an unsigned or wrongly signed one (the previous
// keeps serving, the rejection is counted).
func TestSignedAuthz(t *testing.T) {
	cpKey := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	stranger := ed25519.NewKeyFromSeed(append(make([]byte, ed25519.SeedSize-1), 1))
	pubFile := filepath.Join(t.TempDir(), "cp.pub")
	if err := os.WriteFile(pubFile, snapsign.MarshalPublicKey(cpKey.Public().(ed25519.PublicKey)), 0o600); err != nil {
		t.Fatal(err)
	}
	cp := startControlPlane(t)
	cp.publishSigned("authz.json", snapsign.AuthzPayloadType, authzDoc(1, keyFull, keyLimited), cpKey)
	s := startStack(t, stackOptions{
		authzSource: cp.srv.URL(cpserver.AuthzPath), authzVerifyKey: pubFile,
		controlPlane: "poll_interval = \"1s\"\nlong_poll = \"30s\"\nstale_after = \"1m\"",
	})
	status := func() int { return s.do(http.MethodPost, "/v1/chat/completions", bearer(clientKey), chat).status }
	if got := status(); got != 200 {
		t.Fatalf("signed snapshot: status %d, want 200", got)
	}

	// Unsigned, and signed by a stranger: both would revoke k-full,
	// neither applies.
	cp.publish("authz.json", authzDoc(2, keyLimited))
	s.events.waitForContaining(t, "not a signed envelope", 5*time.Second)
	cp.publishSigned("authz.json", snapsign.AuthzPayloadType, authzDoc(3, keyLimited), stranger)
	s.events.waitForContaining(t, "no valid signature by a trusted key", 5*time.Second)
	if got := status(); got != 200 {
		t.Fatalf("after unsigned publishes: status %d, want 200 (the signed version 1 keeps serving)", got)
	}
	if m := s.scrapeMetrics(); !strings.Contains(m, `scootgate_snapshot_signature_rejections_total{kind="authz"} `) ||
		strings.Contains(m, `scootgate_snapshot_signature_rejections_total{kind="authz"} 0`) {
		t.Error("signature rejections not counted in scootgate_snapshot_signature_rejections_total")
	}

	// The signed revocation applies.
	cp.publishSigned("authz.json", snapsign.AuthzPayloadType, authzDoc(4, keyLimited), cpKey)
	s.events.waitFor(t, applied("authz", 4), 5*time.Second)
	if got := status(); got != 401 {
		t.Fatalf("after the signed revocation: status %d, want 401", got)
	}
}
