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
	"github.com/scootgate/scootgate/internal/devstack/fakeprovider"
	"github.com/scootgate/scootgate/internal/devstack/faketoken"
)

// Claude on Bedrock with workload identity (EKS IRSA): the node assumes
// stsRole with a projected token file at a fake STS (TLS, through the
// egress proxy) and signs with the keys it gets.
const (
	stsRole     = "arn:aws:iam::123456789012:role/scootgate-node"
	stsIdentity = "eyJhbGciOiJSUzI1NiJ9.irsa-canary-token.sig"
)

// startSTSStack starts a fake STS on clk issuing the fake Bedrock's keys,
// and a Bedrock stack (o's egress) whose aws credential assumes its role.
func startSTSStack(t *testing.T, clk *clock.Fake, o stackOptions) (*stack, *faketoken.STS) {
	t.Helper()
	sts := faketoken.NewSTS(faketoken.STSOptions{
		Options: faketoken.Options{Now: clk.Now, Lifetime: time.Hour},
		RoleARN: stsRole, Token: stsIdentity,
		Keys: faketoken.STSKeys{AccessKeyID: bedrockKeys.AccessKeyID, SecretAccessKey: bedrockKeys.SecretAccessKey, SessionToken: bedrockKeys.SessionToken},
	})
	srv := httptest.NewTLSServer(sts)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	o.stsCA = filepath.Join(dir, "sts-ca.pem")
	if err := os.WriteFile(o.stsCA, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	o.stsTokenFile = filepath.Join(dir, "token")
	if err := os.WriteFile(o.stsTokenFile, []byte(stsIdentity), 0o600); err != nil {
		t.Fatal(err)
	}
	o.bedrock, o.stsURL, o.tokenClock = true, srv.URL, clk.Now
	return startStack(t, o), sts
}

func bedrockMessage(s *stack) response {
	return s.do(http.MethodPost, "/v1/messages", map[string]string{"x-api-key": clientKey, "anthropic-version": "2023-06-01"},
		`{"model":"`+bedrockModel+`","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)
}

// TestBedrockWebIdentityThroughProxies: the grant and the signed request
// go through the in-process SOCKS5 and CONNECT proxies and the real
// dante and tinyproxy.
func TestBedrockWebIdentityThroughProxies(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    func(t *testing.T) stackOptions
	}{
		{"socks", func(*testing.T) stackOptions { return stackOptions{egress: "socks"} }},
		{"connect", func(*testing.T) stackOptions { return stackOptions{egress: "connect", proxyAuth: true} }},
		{"dante", func(t *testing.T) stackOptions {
			return stackOptions{proxyURL: "socks5://" + requireDaemon(t, "SCOOTGATE_DANTE_ADDR", "dante-server (SOCKS5)")}
		}},
		{"tinyproxy", func(t *testing.T) stackOptions {
			return stackOptions{proxyURL: requireDaemon(t, "SCOOTGATE_TINYPROXY_URL", "tinyproxy (HTTP CONNECT)")}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, sts := startSTSStack(t, clock.NewFake(time.Now()), tc.o(t))
			if r := bedrockMessage(s); r.status != http.StatusOK {
				t.Fatalf("status %d body %s", r.status, r.body)
			}
			last := lastProvRequest(t, s)
			if last.Protocol != fakeprovider.Bedrock || last.Header.Get("X-Amz-Security-Token") != bedrockKeys.SessionToken {
				t.Fatalf("provider saw %s, security token %q: want Bedrock signed with the role's keys", last.Protocol, last.Header.Get("X-Amz-Security-Token"))
			}
			if n := sts.Grants(); n != 1 {
				t.Errorf("%d grants, want 1", n)
			}
		})
	}
}

// TestBedrockWebIdentity: the role's keys are obtained once and reused,
// replaced when they expire (on the node's clock); a failing STS makes
// the Bedrock backend unusable without blaming it (the Anthropic target
// serves), /readyz and the metric say so, and the backend works again
// once a grant does. The web identity token and the keys are never
// logged.
func TestBedrockWebIdentity(t *testing.T) {
	clk := clock.NewFake(time.Now())
	s, sts := startSTSStack(t, clk, stackOptions{egress: "socks"})
	for range 3 {
		if r := bedrockMessage(s); r.status != http.StatusOK {
			t.Fatalf("status %d body %s", r.status, r.body)
		}
		if last := lastProvRequest(t, s); last.Protocol != fakeprovider.Bedrock {
			t.Fatalf("request went to %s", last.Protocol)
		}
	}
	if n := sts.Grants(); n != 1 {
		t.Fatalf("%d grants for 3 requests, want 1", n)
	}
	clk.Advance(time.Hour + time.Minute)
	if r := bedrockMessage(s); r.status != http.StatusOK || lastProvRequest(t, s).Protocol != fakeprovider.Bedrock {
		t.Fatalf("after expiry: status %d body %s", r.status, r.body)
	}
	if n := sts.Grants(); n != 2 {
		t.Fatalf("%d grants after the keys expired, want 2", n)
	}

	// STS fails and the keys expire: Bedrock is not sent to, not blamed.
	sts.Fail(http.StatusServiceUnavailable)
	clk.Advance(time.Hour + time.Minute)
	if r := bedrockMessage(s); r.status != http.StatusOK {
		t.Fatalf("with STS failing: status %d body %s", r.status, r.body)
	}
	if last := lastProvRequest(t, s); last.Protocol != fakeprovider.Anthropic {
		t.Errorf("with no keys the request went to %s, want the Anthropic target", last.Protocol)
	}
	if d := awsReadyDetail(t, s); !strings.HasPrefix(d, "expired") || !strings.Contains(d, "503") {
		t.Errorf("readyz detail %q, want expired with STS's status", d)
	}
	if want := `scootgate_credential_token_state{credential="aws",state="expired"} 1`; !strings.Contains(s.scrapeMetrics(), want) {
		t.Errorf("metrics lack %s", want)
	}

	// STS recovers: after the backoff, Bedrock serves again.
	sts.Fail(0)
	clk.Advance(2 * time.Minute)
	if r := bedrockMessage(s); r.status != http.StatusOK || lastProvRequest(t, s).Protocol != fakeprovider.Bedrock {
		t.Fatalf("after recovery: status %d body %s, provider %s", r.status, r.body, lastProvRequest(t, s).Protocol)
	}
	for _, secret := range []string{stsIdentity, bedrockKeys.SecretAccessKey, bedrockKeys.SessionToken} {
		if strings.Contains(s.logs.String(), secret) {
			t.Errorf("the logs hold a secret (%.10s…)", secret)
		}
	}
}

func awsReadyDetail(t *testing.T, s *stack) string {
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
	return rep.Details["credential aws"]
}
