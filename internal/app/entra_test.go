package app

import (
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/clock"
	"github.com/scootgate/scootgate/internal/devstack/faketoken"
)

// An Azure backend with an azure_entra credential: the node gets Entra
// tokens from a fake tenant (TLS, through the egress proxy) and sends
// them as Authorization: Bearer.
const (
	entraTenant = "contoso.onmicrosoft.com"
	entraClient = "00000000-0000-0000-0000-00000000c11e"
	entraSecret = "entra-secret-canary-Qx7"
	// entraOnly is a model whose one target is the Entra backend.
	entraOnly = "gpt-entra-only"
)

// startEntraStack starts a fake Entra tenant on clk and a stack whose
// Azure backend uses it.
func startEntraStack(t *testing.T, clk *clock.Fake) (*stack, *faketoken.Entra) {
	t.Helper()
	entra := faketoken.NewEntra(faketoken.EntraOptions{
		Options: faketoken.Options{Now: clk.Now, Lifetime: time.Hour},
		Tenant:  entraTenant, ClientID: entraClient, ClientSecret: entraSecret,
	})
	srv := httptest.NewTLSServer(entra)
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "entra-ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startStack(t, stackOptions{egress: "socks", azure: true, azureVersion: azureVersion,
		entra: entra, entraURL: srv.URL, entraCA: ca, tokenClock: clk.Now,
		extraTOML: `
[models.` + entraOnly + `]
[[models.` + entraOnly + `.targets]]
backend = "az"
model = "` + azureDeployment + `"
weight = 1
stream = true
`})
	return s, entra
}

func entraChat(s *stack, model string) response {
	return s.do(http.MethodPost, "/v1/chat/completions", map[string]string{"Authorization": "Bearer " + clientKey},
		`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`)
}

// TestAzureEntra: the token is minted once and reused, replaced when it
// expires (on the node's clock), and a failing token endpoint makes the
// backend unusable without blaming it: the model's other target serves,
// a model with no other target gets the node's 502, /readyz says why,
// and the backend works again once a grant does.
func TestAzureEntra(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s, entra := startEntraStack(t, clk)

	for range 2 {
		if r := entraChat(s, entraOnly); r.status != http.StatusOK {
			t.Fatalf("status %d body %s", r.status, r.body)
		}
		last := lastProvRequest(t, s)
		if !last.Azure || !strings.HasPrefix(last.Header.Get("Authorization"), "Bearer fake-entra.") || last.Header.Get("Api-Key") != "" {
			t.Fatalf("the provider did not get the Entra token alone (azure %v)", last.Azure)
		}
	}
	if g := entra.Grants(); g != 1 {
		t.Errorf("%d grants for two requests, want 1", g)
	}
	if d := tokenReadyDetail(t, s); d != "ok, token expires 2026-01-02T04:04:05Z" {
		t.Errorf("readyz detail %q", d)
	}

	// Expired on the node's clock (and the tenant's): the next request
	// waits for a new token.
	clk.Advance(time.Hour)
	if r := entraChat(s, entraOnly); r.status != http.StatusOK {
		t.Fatalf("after expiry: status %d body %s", r.status, r.body)
	}
	if g := entra.Grants(); g != 2 {
		t.Errorf("%d grants after the expiry, want 2", g)
	}

	// The tenant fails and the token expires.
	entra.Fail(http.StatusServiceUnavailable)
	clk.Advance(time.Hour)
	r := entraChat(s, entraOnly)
	if r.status != http.StatusBadGateway || !strings.Contains(r.body, "no valid token") {
		t.Fatalf("no token, one target: status %d body %s, want 502 about the token", r.status, r.body)
	}
	if r := entraChat(s, azureModel); r.status != http.StatusOK {
		t.Fatalf("no token, a second target: status %d body %s", r.status, r.body)
	}
	if last := lastProvRequest(t, s); last.Azure {
		t.Error("a request reached Azure without a token")
	}
	if d := tokenReadyDetail(t, s); !strings.HasPrefix(d, "expired") || !strings.Contains(d, "503") {
		t.Errorf("readyz detail %q, want the expired state and the grant's status", d)
	}
	text := s.scrapeMetrics()
	for _, want := range []string{`scootgate_credential_token_state{credential="entra",state="expired"} 1`, `scootgate_credential_token_state{credential="entra",state="ok"} 0`} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	// The tenant recovers: after the backoff, the backend works again.
	entra.Fail(0)
	clk.Advance(10 * time.Minute)
	if r := entraChat(s, entraOnly); r.status != http.StatusOK {
		t.Fatalf("after recovery: status %d body %s", r.status, r.body)
	}
	if logs := s.logs.String(); strings.Contains(logs, entraSecret) || strings.Contains(logs, "fake-entra.") {
		t.Error("the client secret or a token reached the logs")
	}
}

func tokenReadyDetail(t *testing.T, s *stack) string {
	t.Helper()
	resp, err := http.Get(s.health + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep ReadyReport
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		t.Fatal(err)
	}
	return rep.Details["credential entra"]
}
