package credential_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/credential"
	"github.com/scootgate/scootgate/internal/secret"
)

// TestGrantThroughEgress obtains a token of each kind through each proxy
// (the in-process SOCKS5 server, and the real dante and tinyproxy when
// they run) and checks the fake endpoint counts it live.
func TestGrantThroughEgress(t *testing.T) {
	for _, r := range routes {
		for _, k := range []string{credential.KindGCPServiceAccount, credential.KindAzureEntra} {
			t.Run(r.name+"/"+k, func(t *testing.T) {
				w := newWorld(t, time.Hour)
				p, tunnels := r.proxy(t)
				var ts *credential.TokenSource
				if k == credential.KindGCPServiceAccount {
					w.googleTr = egressTransport(t, p, w.gep)
					ts = w.gcp(t)
				} else {
					w.entraTr = egressTransport(t, p, w.eep)
					ts = w.azure(t, entraSecret)
				}
				tok := w.token(t, ts)
				live := w.google.Live(tok) || w.entra.Live(tok)
				if !live {
					t.Fatal("the token handed out is not live at the fake endpoint")
				}
				if tunnels != nil && tunnels() == 0 {
					t.Fatal("the grant did not go through the proxy")
				}
				st := ts.Status()
				if st.State != credential.TokenOK || !st.Expiry.Equal(w.clk.Now().Add(time.Hour)) {
					t.Fatalf("Status = %+v; want ok, expiring in an hour by the credential's clock", st)
				}
				if got := ts.Kind(); got != k {
					t.Errorf("Kind() = %q, want %q", got, k)
				}
			})
		}
	}
}

// TestStampedeAtExpiry: 1,000 callers arriving after the token expired
// all wait for one grant and get its token.
func TestStampedeAtExpiry(t *testing.T) {
	w := newWorld(t, time.Hour)
	ts := w.gcp(t)
	first := w.token(t, ts)
	w.clk.Advance(time.Hour) // past expiry (and the 10 s margin)

	const callers = 1000
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		got   = make([]string, callers)
		errs  = make([]error, callers)
	)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			s, err := ts.Token(t.Context())
			got[i], errs[i] = s.Reveal(), err
		}()
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	w.remember(got[0])
	for i, v := range got {
		if v != got[0] || v == first {
			t.Fatalf("caller %d got a different token than caller 0, or the expired one", i)
		}
	}
	if n := w.gep.requests.Load(); n != 2 {
		t.Fatalf("token endpoint saw %d grants; want 2 (the first token, then one for all 1000 callers)", n)
	}
}

// TestRefreshAheadDoesNotBlock: inside the refresh window 1,000 callers
// get the current token at once while one grant, held at the endpoint,
// replaces it; the next caller after it gets the new one.
func TestRefreshAheadDoesNotBlock(t *testing.T) {
	w := newWorld(t, time.Hour)
	ts := w.gcp(t)
	first := w.token(t, ts)
	w.clk.Advance(time.Hour - credential.RefreshWindow + time.Second)
	w.gep.holdGrants()

	const callers = 1000
	var wg sync.WaitGroup
	got := make([]string, callers)
	errs := make([]error, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := ts.Token(t.Context())
			got[i], errs[i] = s.Reveal(), err
		}()
	}
	wg.Wait() // while the grant is still held at the endpoint
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if v != first {
			t.Fatalf("caller %d did not get the current token", i)
		}
	}
	wait(t, w.gep.entered, "the refresh grant")
	w.gep.release()
	credential.WaitGrant(ts)
	second := w.token(t, ts)
	if second == first {
		t.Fatal("the refresh did not replace the token")
	}
	if n := w.gep.requests.Load(); n != 2 {
		t.Fatalf("token endpoint saw %d grants; want 2", n)
	}
	if st := ts.Status(); st.State != credential.TokenOK || !st.Expiry.Equal(w.clk.Now().Add(time.Hour)) {
		t.Fatalf("Status = %+v; want ok, with the new token's expiry", st)
	}
}

// TestRefreshWindow: the window is RefreshWindow, or half the life of a
// token that lives less than twice that; nothing is due before it.
func TestRefreshWindow(t *testing.T) {
	tests := []struct {
		life, window time.Duration
	}{
		{time.Hour, credential.RefreshWindow},
		{2 * credential.RefreshWindow, credential.RefreshWindow},
		{4 * time.Minute, 2 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.life.String(), func(t *testing.T) {
			w := newWorld(t, tt.life)
			ts := w.azure(t, entraSecret)
			w.token(t, ts)
			w.clk.Advance(tt.life - tt.window - time.Second)
			w.token(t, ts)
			credential.WaitGrant(ts)
			if n := w.eep.requests.Load(); n != 1 {
				t.Fatalf("a grant %s before the window: %d grants", time.Second, n)
			}
			w.clk.Advance(time.Second)
			w.token(t, ts)
			credential.WaitGrant(ts)
			if n := w.eep.requests.Load(); n != 2 {
				t.Fatalf("no grant at the window's start: %d grants", n)
			}
		})
	}
}

// TestRefreshFailure: a failing endpoint leaves the valid token in use
// until it expires, with backoff between grants; then callers fail at
// once, clearly; the first grant that works again restores everything.
func TestRefreshFailure(t *testing.T) {
	w := newWorld(t, time.Hour)
	ts := w.gcp(t)
	t0 := w.clk.Now()
	first := w.token(t, ts)
	w.google.Fail(http.StatusServiceUnavailable)

	// Inside the window: the grant fails, the token stays.
	w.clk.Set(t0.Add(56 * time.Minute))
	failStart := w.clk.Now()
	if got := w.token(t, ts); got != first {
		t.Fatal("the valid token was not handed out")
	}
	credential.WaitGrant(ts)
	st := ts.Status()
	var ge *credential.GrantError
	if !errors.As(st.Err, &ge) {
		t.Fatalf("Status.Err = %v; want a *GrantError", st.Err)
	}
	want := credential.GrantError{Host: "127.0.0.1", Status: 503, Code: "temporarily_unavailable"}
	if diff := cmp.Diff(*ge, want); diff != "" {
		t.Errorf("GrantError (-got +want):\n%s", diff)
	}
	if st.State != credential.TokenRefreshFailing || st.Failures != 1 || !st.FailingSince.Equal(failStart) {
		t.Fatalf("Status = %+v; want refresh_failing, 1 failure since %v", st, failStart)
	}

	// Within the backoff: no grant.
	w.clk.Advance(credential.BackoffMin - time.Millisecond)
	w.token(t, ts)
	credential.WaitGrant(ts)
	if n := w.gep.requests.Load(); n != 2 {
		t.Fatalf("%d grants; want none during the backoff", n)
	}
	w.clk.Advance(time.Millisecond)
	w.token(t, ts)
	credential.WaitGrant(ts)
	if n := w.gep.requests.Load(); n != 3 {
		t.Fatalf("%d grants; want one after the backoff", n)
	}

	// Expired: the waiting caller's grant fails, and says why.
	w.clk.Set(t0.Add(time.Hour - credential.ExpiryMargin))
	_, err := ts.Token(t.Context())
	if !errors.Is(err, credential.ErrNoToken) || !errors.As(err, &ge) {
		t.Fatalf("Token after expiry = %v; want ErrNoToken wrapping a GrantError", err)
	}
	wantMsg := `credential "vertex": no valid token: token endpoint 127.0.0.1 answered 503 temporarily_unavailable`
	if err.Error() != wantMsg {
		t.Errorf("error = %q\nwant    %q", err, wantMsg)
	}
	// Again at once: no grant (backoff), the same reason, with the story.
	_, err = ts.Token(t.Context())
	if !errors.Is(err, credential.ErrNoToken) || !strings.Contains(err.Error(), "the last one expired at") ||
		!strings.Contains(err.Error(), "3 grants failed since") || !strings.Contains(err.Error(), "503 temporarily_unavailable") {
		t.Fatalf("Token during the backoff = %v", err)
	}
	if n := w.gep.requests.Load(); n != 4 {
		t.Fatalf("%d grants; want 4", n)
	}
	if st := ts.Status(); st.State != credential.TokenExpired || st.Failures != 3 {
		t.Fatalf("Status = %+v; want expired after 3 failures", st)
	}

	// Recovery.
	w.google.Fail(0)
	w.clk.Advance(credential.BackoffMax)
	if got := w.token(t, ts); got == first {
		t.Fatal("recovered with the expired token")
	}
	if st := ts.Status(); st.State != credential.TokenOK || st.Failures != 0 || st.Err != nil || !st.FailingSince.IsZero() {
		t.Fatalf("Status = %+v; want ok with no failures", st)
	}
	logs := w.log.String()
	if n := strings.Count(logs, "credential token grant failed"); n != 3 {
		t.Errorf("%d failure lines in the log; want 3:\n%s", n, logs)
	}
	if !strings.Contains(logs, "credential token grant works again") || !strings.Contains(logs, `"credential":"vertex"`) {
		t.Errorf("no recovery line naming the credential:\n%s", logs)
	}
	checkNoSecrets(t, w, logs)
}

func TestBackoff(t *testing.T) {
	var got []time.Duration
	for n := 1; n <= 9; n++ {
		got = append(got, credential.Backoff(n))
	}
	want := []time.Duration{1, 2, 4, 8, 16, 32, 60, 60, 60}
	for i := range want {
		want[i] *= time.Second
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("backoff (-got +want):\n%s", diff)
	}
}

// TestFirstGrantFails: with no token at all, the first caller's grant
// fails and later callers fail at once until the backoff passes.
func TestFirstGrantFails(t *testing.T) {
	w := newWorld(t, time.Hour)
	ts := w.azure(t, "canary-wrong-secret")
	if st := ts.Status(); st.State != credential.TokenPending {
		t.Fatalf("Status before any call = %v; want pending", st.State)
	}
	_, err := ts.Token(t.Context())
	want := `credential "azure": no valid token: token endpoint 127.0.0.1 answered 401 invalid_client (AADSTS7000215)`
	if err == nil || err.Error() != want {
		t.Fatalf("Token = %v\nwant     %s", err, want)
	}
	_, err = ts.Token(t.Context())
	if !errors.Is(err, credential.ErrNoToken) || !strings.Contains(err.Error(), "none obtained yet") {
		t.Fatalf("second Token = %v", err)
	}
	if n := w.eep.requests.Load(); n != 1 {
		t.Fatalf("%d grants; want 1", n)
	}
	if st := ts.Status(); st.State != credential.TokenExpired {
		t.Fatalf("Status = %v; want expired", st.State)
	}
	checkNoSecrets(t, w, err.Error(), "canary-wrong-secret")
}

// TestCallerGoesAway: a waiting caller's context ends its wait, not the
// grant, whose token the next caller gets.
func TestCallerGoesAway(t *testing.T) {
	w := newWorld(t, time.Hour)
	ts := w.gcp(t)
	w.gep.holdGrants()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := ts.Token(ctx)
		done <- err
	}()
	wait(t, w.gep.entered, "the grant")
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Token = %v; want context.Canceled", err)
	}
	w.gep.release()
	credential.WaitGrant(ts)
	w.token(t, ts)
	if n := w.gep.requests.Load(); n != 1 {
		t.Fatalf("%d grants; want 1", n)
	}
}

// TestClose stops a grant in flight and starts no other.
func TestClose(t *testing.T) {
	w := newWorld(t, time.Hour)
	ts := w.gcp(t)
	w.gep.holdGrants()
	done := make(chan error, 1)
	go func() {
		_, err := ts.Token(t.Context())
		done <- err
	}()
	wait(t, w.gep.entered, "the grant")
	ts.Close() // returns although the endpoint still holds the request
	if err := <-done; !errors.Is(err, credential.ErrNoToken) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Token = %v; want ErrNoToken and context.Canceled", err)
	}
	_, err := ts.Token(t.Context())
	if !errors.Is(err, credential.ErrNoToken) || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("Token after Close = %v", err)
	}
	if n := w.gep.requests.Load(); n != 1 {
		t.Fatalf("%d grants; want 1", n)
	}
}

// TestRun keeps the token fresh without callers, and stops with its
// context.
func TestRun(t *testing.T) {
	w := newWorld(t, time.Hour)
	ts, err := credential.NewGCPServiceAccount(credential.GCPOptions{
		TokenOptions: func() credential.TokenOptions {
			o := w.opts("vertex", w.googleTr)
			o.CheckEvery = time.Millisecond
			return o
		}(),
		Key: secret.New(string(w.google.KeyJSON(w.googleKeyURL))),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ts.Close)
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		ts.Run(ctx)
	}()
	wait(t, w.gep.served, "the first grant")
	credential.WaitGrant(ts)
	if st := ts.Status(); st.State != credential.TokenOK {
		t.Fatalf("Status = %v after Run's first grant", st.State)
	}
	w.clk.Advance(time.Hour - credential.RefreshWindow)
	wait(t, w.gep.served, "the refresh")
	credential.WaitGrant(ts)
	if st := ts.Status(); !st.Expiry.Equal(w.clk.Now().Add(time.Hour)) {
		t.Fatalf("Status = %+v; want the refreshed token's expiry", st)
	}
	cancel()
	<-stopped
}

// TestTokenURLOutsideHosts: a token endpoint the credential's hosts do
// not list is refused when the credential is made, and at a grant after
// the key file changed; no request leaves.
func TestTokenURLOutsideHosts(t *testing.T) {
	w := newWorld(t, time.Hour)
	outside := "https://oauth2.example.net/token"
	_, err := credential.NewGCPServiceAccount(credential.GCPOptions{
		TokenOptions: w.opts("vertex", w.googleTr),
		Key:          secret.New(string(w.google.KeyJSON(outside))),
	})
	want := `credential "vertex": token endpoint host "oauth2.example.net" is not in credentials.vertex.hosts: the token endpoint is egress like the provider, list its host there`
	if err == nil || err.Error() != want {
		t.Fatalf("NewGCPServiceAccount = %v\nwant %s", err, want)
	}
	_, err = credential.NewGCPServiceAccount(credential.GCPOptions{
		TokenOptions: w.opts("vertex", w.googleTr),
		Key:          secret.New(string(w.google.KeyJSON(strings.Replace(w.googleKeyURL, "https:", "http:", 1)))),
	})
	if err == nil || !strings.Contains(err.Error(), "not https://") {
		t.Fatalf("http:// token endpoint: %v", err)
	}
	_, err = credential.NewAzureEntra(credential.AzureOptions{
		TokenOptions: w.opts("azure", w.entraTr),
		TenantID:     entraTenant, ClientID: entraClient, ClientSecret: secret.New(entraSecret),
	})
	want = `credential "azure": token endpoint host "login.microsoftonline.com" is not in credentials.azure.hosts: the token endpoint is egress like the provider, list its host there`
	if err == nil || err.Error() != want {
		t.Fatalf("NewAzureEntra = %v\nwant %s", err, want)
	}

	// A key file rotated to one naming another endpoint: the grant
	// checks the new one before sending anything.
	path := filepath.Join(t.TempDir(), "key.json")
	writeKey := func(tokenURL string) {
		var b bytes.Buffer
		if err := json.Compact(&b, w.google.KeyJSON(tokenURL)); err != nil { // one line, as a secret file holds
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeKey(w.googleKeyURL)
	key, err := secret.FromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	watcher := secret.NewWatcher(secret.WatchOptions{}, key)
	ts, err := credential.NewGCPServiceAccount(credential.GCPOptions{TokenOptions: w.opts("vertex", w.googleTr), Key: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ts.Close)
	w.token(t, ts)
	writeKey(outside)
	watcher.Check()
	if r, _ := watcher.Stats(); r != 1 {
		t.Fatalf("the key file was not re-read (%d reloads)", r)
	}
	w.clk.Advance(time.Hour)
	_, err = ts.Token(t.Context())
	if err == nil || !strings.Contains(err.Error(), `token endpoint host "oauth2.example.net" is not in credentials.vertex.hosts`) {
		t.Fatalf("Token after the key named another endpoint = %v", err)
	}
	if n := w.gep.requests.Load(); n != 1 {
		t.Fatalf("%d grants; want only the first", n)
	}
}

// TestRedirectRefused: a token endpoint that redirects fails the grant;
// the redirect is not followed, so the credential goes nowhere else.
func TestRedirectRefused(t *testing.T) {
	w := newWorld(t, time.Hour)
	target := newEndpoint(t, w.google)
	redirector := newEndpoint(t, http.RedirectHandler(target.URL+"/token", http.StatusTemporaryRedirect))
	p, _ := routes[0].proxy(t)
	ts, err := credential.NewGCPServiceAccount(credential.GCPOptions{
		TokenOptions: w.opts("vertex", egressTransport(t, p, redirector, target)),
		Key:          secret.New(string(w.google.KeyJSON(redirector.URL + "/token"))),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ts.Close)
	_, err = ts.Token(t.Context())
	var ge *credential.GrantError
	if !errors.As(err, &ge) || ge.Status != http.StatusTemporaryRedirect || !strings.Contains(err.Error(), "does not follow") {
		t.Fatalf("Token = %v; want a GrantError for the 307", err)
	}
	if n := target.requests.Load(); n != 0 {
		t.Fatalf("the redirect was followed (%d requests)", n)
	}
}

// TestNothingPrintsSecrets: every printed form of a credential, its
// status and its errors is free of tokens and key material.
func TestNothingPrintsSecrets(t *testing.T) {
	w := newWorld(t, time.Hour)
	g, a := w.gcp(t), w.azure(t, entraSecret)
	w.token(t, g)
	w.token(t, a)
	w.google.Fail(http.StatusBadRequest)
	w.clk.Advance(time.Hour)
	_, gerr := g.Token(t.Context())
	var out []string
	for _, v := range []any{g, a, g.Status(), a.Status(), gerr} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
			out = append(out, fmt.Sprintf(verb, v))
		}
	}
	out = append(out, w.log.String())
	checkNoSecrets(t, w, strings.Join(out, "\n"))
	if got := fmt.Sprintf("%+v", g); got != `credential "vertex" (gcp_service_account)` {
		t.Errorf("%%+v = %s", got)
	}
}

// checkNoSecrets fails when text holds any value w.secrets lists or
// extra.
func checkNoSecrets(t *testing.T, w *world, text string, extra ...string) {
	t.Helper()
	for _, s := range append(w.secrets(), extra...) {
		if strings.Contains(text, s) {
			t.Fatalf("output contains a secret value (%d bytes)", len(s))
		}
	}
}

// BenchmarkTokenFresh is the request path's cost of a minted credential
// while its token is fresh: one clock read and one atomic load.
func BenchmarkTokenFresh(b *testing.B) {
	w := newWorld(b, time.Hour)
	ts, err := credential.NewAzureEntra(credential.AzureOptions{
		TokenOptions: credential.TokenOptions{Name: "azure", Hosts: []string{"127.0.0.1"}, Transport: w.entraTr},
		TenantID:     entraTenant, ClientID: entraClient, ClientSecret: secret.New(entraSecret),
		AuthorityHost: w.eep.URL,
	})
	if err != nil {
		b.Fatal(err)
	}
	defer ts.Close()
	ctx := b.Context()
	if _, err := ts.Token(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := ts.Token(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
