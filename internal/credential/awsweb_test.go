package credential_test

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/clock"
	"github.com/scootgate/scootgate/internal/credential"
	"github.com/scootgate/scootgate/internal/devstack/faketoken"
)

// Canaries of the aws_web_identity tests.
const (
	stsRole     = "arn:aws:iam::123456789012:role/scootgate-node"
	stsIdentity = "eyJhbGciOiJSUzI1NiJ9.canary-web-identity.sig"
)

var stsKeys = faketoken.STSKeys{
	AccessKeyID:     "ASIAFAKECANARY000001",
	SecretAccessKey: "sts-secret-canary/wJalrXUtnFEMI+K7MDENG",
	SessionToken:    "sts-session-canary-IQoJb3JpZ2luX2VjEJr==",
}

// stsWorld is a fake STS behind TLS and a web identity token file.
type stsWorld struct {
	sts       *faketoken.STS
	ep        *endpoint
	clk       *clock.Fake
	tokenFile string
	log       logBuffer
}

func newSTSWorld(t *testing.T) *stsWorld {
	t.Helper()
	w := &stsWorld{clk: clock.NewFake(time.Now())}
	w.sts = faketoken.NewSTS(faketoken.STSOptions{
		Options: faketoken.Options{Now: w.clk.Now, Lifetime: time.Hour},
		RoleARN: stsRole, Token: stsIdentity, Keys: stsKeys,
	})
	w.ep = newEndpoint(t, w.sts)
	w.tokenFile = filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(w.tokenFile, []byte(stsIdentity+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *stsWorld) source(t *testing.T, tr http.RoundTripper, hosts ...string) (*credential.TokenSource, error) {
	t.Helper()
	if hosts == nil {
		hosts = []string{"127.0.0.1"}
	}
	ts, err := credential.NewAWSWebIdentity(credential.AWSWebIdentityOptions{
		TokenOptions: credential.TokenOptions{Name: "irsa", Hosts: hosts, Transport: tr, Now: w.clk.Now, Logger: w.log.logger()},
		RoleARN:      stsRole, TokenFile: w.tokenFile, STSEndpoint: w.ep.URL, Region: "us-east-1",
	})
	if err == nil {
		t.Cleanup(ts.Close)
	}
	return ts, err
}

// sign signs a Bedrock request with the credential's keys.
func sign(t *testing.T, ts *credential.TokenSource, now func() time.Time) (*http.Request, error) {
	t.Helper()
	keys := &credential.AWS{Minted: ts}
	r, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "https://bedrock-runtime.us-east-1.amazonaws.com/model/m/invoke", strings.NewReader("{}"))
	return r, keys.Signer("bedrock", "us-east-1", now).Sign(r, [][]byte{[]byte("{}")})
}

// TestAWSWebIdentityThroughEgress: the keys of the role come from STS's
// AssumeRoleWithWebIdentity, reached through each proxy, and sign
// Bedrock requests (access key id in the signature, session token in
// X-Amz-Security-Token).
func TestAWSWebIdentityThroughEgress(t *testing.T) {
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			w := newSTSWorld(t)
			p, tunnels := rt.proxy(t)
			ts, err := w.source(t, egressTransport(t, p, w.ep))
			if err != nil {
				t.Fatal(err)
			}
			r, err := sign(t, ts, w.clk.Now)
			if err != nil {
				t.Fatalf("Sign: %v", err)
			}
			if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential="+stsKeys.AccessKeyID+"/") ||
				r.Header.Get("X-Amz-Security-Token") != stsKeys.SessionToken {
				t.Errorf("not signed with the role's keys: %v", r.Header)
			}
			if tunnels != nil && tunnels() == 0 {
				t.Error("the grant did not go through the proxy")
			}
			if st := ts.Status(); st.State != credential.TokenOK || ts.Kind() != credential.KindAWSWebIdentity {
				t.Errorf("Status %+v kind %s", st, ts.Kind())
			}
		})
	}
}

// TestAWSWebIdentityRefresh: the keys are cached (one grant for many
// signatures) and replaced ahead of their expiration by one grant; the
// token file is read again at that grant.
func TestAWSWebIdentityRefresh(t *testing.T) {
	w := newSTSWorld(t)
	p, _ := routes[0].proxy(t)
	ts, err := w.source(t, egressTransport(t, p, w.ep))
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if _, err := sign(t, ts, w.clk.Now); err != nil {
			t.Fatal(err)
		}
	}
	if n := w.sts.Grants(); n != 1 {
		t.Fatalf("%d grants for 20 signatures, want 1", n)
	}
	// Inside the refresh window: the current keys sign, one grant
	// replaces them in the background.
	w.clk.Advance(time.Hour - credential.RefreshWindow + time.Second)
	if _, err := sign(t, ts, w.clk.Now); err != nil {
		t.Fatal(err)
	}
	credential.WaitGrant(ts)
	if n := w.sts.Grants(); n != 2 {
		t.Errorf("%d grants, want 2", n)
	}
	// A rotated token file the IdP no longer accepts: the next grant
	// fails, the valid keys still sign until they expire.
	if err := os.WriteFile(w.tokenFile, []byte("rotated-but-refused"), 0o600); err != nil {
		t.Fatal(err)
	}
	w.clk.Advance(time.Hour - credential.RefreshWindow + time.Second)
	if _, err := sign(t, ts, w.clk.Now); err != nil {
		t.Fatalf("valid keys refused during a failing refresh: %v", err)
	}
	credential.WaitGrant(ts)
	w.clk.Advance(credential.RefreshWindow)
	_, err = sign(t, ts, w.clk.Now)
	var ge *credential.GrantError
	if !errors.Is(err, credential.ErrNoToken) || !errors.As(err, &ge) || ge.Code != "InvalidIdentityToken" || ge.Status != 400 {
		t.Fatalf("Sign after expiry = %v; want ErrNoToken with STS's 400 InvalidIdentityToken", err)
	}
	for _, s := range []string{stsIdentity, stsKeys.SecretAccessKey, stsKeys.SessionToken, "rotated-but-refused"} {
		if strings.Contains(err.Error(), s) || strings.Contains(w.log.String(), s) {
			t.Errorf("a secret (%.12s…) is in the error or the log", s)
		}
	}
}

// TestAWSWebIdentityChecks: what the node refuses before any grant.
func TestAWSWebIdentityChecks(t *testing.T) {
	w := newSTSWorld(t)
	p, _ := routes[0].proxy(t)
	tr := egressTransport(t, p, w.ep)
	if _, err := w.source(t, tr, "sts.amazonaws.com"); err == nil || !strings.Contains(err.Error(), `token endpoint host "127.0.0.1" is not in credentials.irsa.hosts`) {
		t.Errorf("STS outside hosts: %v", err)
	}
	w.tokenFile = filepath.Join(t.TempDir(), "missing")
	if _, err := w.source(t, tr); err == nil || !strings.Contains(err.Error(), "web identity token file") {
		t.Errorf("missing token file: %v", err)
	}
	if _, err := credential.NewAWSWebIdentity(credential.AWSWebIdentityOptions{
		TokenOptions: credential.TokenOptions{Name: "irsa", Hosts: []string{"127.0.0.1"}, Transport: tr},
		RoleARN:      "scootgate-node", TokenFile: w.tokenFile, STSEndpoint: w.ep.URL,
	}); err == nil || !strings.Contains(err.Error(), "role_arn") {
		t.Errorf("role name for an ARN: %v", err)
	}
	if n := w.sts.Grants(); n != 0 || w.ep.requests.Load() != 0 {
		t.Errorf("%d grants, %d requests: the checks sent something", n, w.ep.requests.Load())
	}
}
