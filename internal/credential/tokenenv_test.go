package credential_test

// The world a minted-token test runs in: fake token endpoints
// (internal/devstack/faketoken) behind real TLS, reached through the real
// egress Dialer and a real proxy: the in-process SOCKS5 server always, and
// the Debian dante and tinyproxy when scripts/ci-daemons.sh started them.

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/clock"
	"github.com/scootgate/scootgate/internal/credential"
	"github.com/scootgate/scootgate/internal/devstack/faketoken"
	"github.com/scootgate/scootgate/internal/devstack/socks5proxy"
	"github.com/scootgate/scootgate/internal/egress"
	"github.com/scootgate/scootgate/internal/secret"
)

// Canaries: no output of the package may contain them.
const (
	entraTenant = "11111111-2222-3333-4444-555555555555"
	entraClient = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
	entraSecret = "canary-entra-secret~7f3a.Q"
)

// demoKey is one RSA key for the package's tests (generating one per test
// costs seconds under -race).
var demoKey = sync.OnceValue(func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
})

// endpoint is a fake token endpoint on a TLS httptest server, with a
// gate a test may close to hold grants, a count of the requests that
// reached it, and what they carried (to check none of it leaks).
type endpoint struct {
	*httptest.Server
	requests atomic.Int64
	entered  chan struct{} // one send per request, when it arrives (buffered, dropped when full)
	served   chan struct{} // one send per request, once answered

	mu   sync.Mutex
	hold chan struct{} // when non-nil, requests wait for it to close
	sent []string      // assertion and client_secret values seen
}

func newEndpoint(t testing.TB, h http.Handler) *endpoint {
	t.Helper()
	e := &endpoint{entered: make(chan struct{}, 4096), served: make(chan struct{}, 4096)}
	e.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.requests.Add(1)
		select {
		case e.entered <- struct{}{}:
		default:
		}
		e.mu.Lock()
		hold := e.hold
		e.mu.Unlock()
		if hold != nil {
			<-hold
		}
		if r.ParseForm() == nil {
			e.mu.Lock()
			e.sent = append(e.sent, r.PostForm.Get("assertion"), r.PostForm.Get("client_secret"))
			e.mu.Unlock()
		}
		h.ServeHTTP(w, r)
		select {
		case e.served <- struct{}{}:
		default:
		}
	}))
	e.Config.ErrorLog = log.New(io.Discard, "", 0)
	e.StartTLS()
	t.Cleanup(e.Close)
	// Registered after Close, so it runs before it: a held request
	// must be let go for Close to return.
	t.Cleanup(func() { e.release() })
	return e
}

// holdGrants makes requests wait until release.
func (e *endpoint) holdGrants() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.hold = make(chan struct{})
}

func (e *endpoint) release() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.hold != nil {
		close(e.hold)
		e.hold = nil
	}
}

// sentValues returns the assertions and secrets requests carried.
func (e *endpoint) sentValues() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var vs []string
	for _, v := range e.sent {
		if v != "" {
			vs = append(vs, v)
		}
	}
	return vs
}

// wait receives from ch or fails the test after a generous bound.
func wait(t testing.TB, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// route is one way out: a proxy the egress Dialer uses.
type route struct {
	name  string
	proxy func(t testing.TB) (egress.Proxy, func() int64) // the proxy and, when known, its tunnel count
}

// routes are the proxies every end-to-end grant test goes through.
var routes = []route{
	{"socks5", func(t testing.TB) (egress.Proxy, func() int64) {
		s, addr, err := socks5proxy.Listen("127.0.0.1:0", socks5proxy.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return egress.Proxy{Name: "socks5", URL: mustURL(t, "socks5://"+addr)}, s.Tunnels
	}},
	{"dante", func(t testing.TB) (egress.Proxy, func() int64) {
		return egress.Proxy{Name: "dante", URL: mustURL(t, "socks5://"+daemonEnv(t, "SCOOTGATE_DANTE_ADDR"))}, nil
	}},
	{"tinyproxy", func(t testing.TB) (egress.Proxy, func() int64) {
		u := mustURL(t, daemonEnv(t, "SCOOTGATE_TINYPROXY_URL"))
		p := egress.Proxy{Name: "tinyproxy", URL: mustURL(t, u.Scheme+"://"+u.Host)}
		if u.User != nil {
			p.Username = u.User.Username()
			pw, _ := u.User.Password()
			p.Password = secret.New(pw)
		}
		return p, nil
	}},
}

// daemonEnv returns the value of name or skips (fails under
// SCOOTGATE_REQUIRE_DAEMONS=1, as CI runs).
func daemonEnv(t testing.TB, name string) string {
	t.Helper()
	if v := os.Getenv(name); v != "" {
		return v
	}
	msg := fmt.Sprintf("%s is unset: real proxy daemon tests NOT RUN; "+
		`start them with: env=$(scripts/ci-daemons.sh) && eval "$env" (root, Debian 12)`, name)
	if os.Getenv("SCOOTGATE_REQUIRE_DAEMONS") == "1" {
		t.Fatal("SCOOTGATE_REQUIRE_DAEMONS=1 but " + msg)
	}
	t.Skip("SKIP: " + msg)
	return ""
}

func mustURL(t testing.TB, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// egressTransport is the node's egress transport through p, trusting the
// endpoints' test certificates.
func egressTransport(t testing.TB, p egress.Proxy, eps ...*endpoint) http.RoundTripper {
	t.Helper()
	cas := x509.NewCertPool()
	for _, e := range eps {
		cas.AddCert(e.Certificate())
	}
	d, err := egress.New(egress.Options{Proxies: []egress.Proxy{p}, ProviderCAs: cas, ConnectTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	tr := d.Transport()
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// logBuffer is a JSON slog handler into a buffer, at debug level.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// world is a Google and an Entra fake endpoint reached through the
// in-process SOCKS5 proxy, a fake clock for the credentials and a log.
type world struct {
	clk          *clock.Fake
	google       *faketoken.Google
	entra        *faketoken.Entra
	gep, eep     *endpoint
	googleTr     http.RoundTripper
	entraTr      http.RoundTripper
	log          logBuffer
	issued       []string // tokens handed out by the tests, to look for
	issuedMu     sync.Mutex
	googleKeyURL string
}

// newWorld starts both endpoints issuing tokens that live lifetime. The
// endpoints keep real time (x/oauth2/jwt dates its assertion by the
// process clock); the credentials get w.clk.
func newWorld(t testing.TB, lifetime time.Duration) *world {
	t.Helper()
	w := &world{clk: clock.NewFake(time.Now())}
	g, err := faketoken.NewGoogle(faketoken.GoogleOptions{Options: faketoken.Options{Lifetime: lifetime}, Key: demoKey()})
	if err != nil {
		t.Fatal(err)
	}
	w.google = g
	w.entra = faketoken.NewEntra(faketoken.EntraOptions{
		Options: faketoken.Options{Lifetime: lifetime},
		Tenant:  entraTenant, ClientID: entraClient, ClientSecret: entraSecret,
	})
	w.gep = newEndpoint(t, g)
	w.eep = newEndpoint(t, w.entra)
	p, _ := routes[0].proxy(t)
	w.googleTr = egressTransport(t, p, w.gep)
	w.entraTr = egressTransport(t, p, w.eep)
	w.googleKeyURL = w.gep.URL + "/token"
	return w
}

func (w *world) opts(name string, tr http.RoundTripper) credential.TokenOptions {
	return credential.TokenOptions{
		Name: name, Hosts: []string{"127.0.0.1"}, Transport: tr,
		Now: w.clk.Now, Logger: w.log.logger(),
	}
}

// gcp is a gcp_service_account credential for the demo account.
func (w *world) gcp(t testing.TB) *credential.TokenSource {
	t.Helper()
	ts, err := credential.NewGCPServiceAccount(credential.GCPOptions{
		TokenOptions: w.opts("vertex", w.googleTr),
		Key:          secret.New(string(w.google.KeyJSON(w.googleKeyURL))),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ts.Close)
	return ts
}

// azure is an azure_entra credential for the fake tenant.
func (w *world) azure(t testing.TB, clientSecret string) *credential.TokenSource {
	t.Helper()
	ts, err := credential.NewAzureEntra(credential.AzureOptions{
		TokenOptions:  w.opts("azure", w.entraTr),
		TenantID:      entraTenant,
		ClientID:      entraClient,
		ClientSecret:  secret.New(clientSecret),
		AuthorityHost: w.eep.URL,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ts.Close)
	return ts
}

// token calls ts.Token and remembers the value for the leak checks.
func (w *world) token(t testing.TB, ts *credential.TokenSource) string {
	t.Helper()
	s, err := ts.Token(t.Context())
	if err != nil {
		t.Fatalf("Token: %v", err)
	}
	w.remember(s.Reveal())
	return s.Reveal()
}

func (w *world) remember(v string) {
	w.issuedMu.Lock()
	defer w.issuedMu.Unlock()
	w.issued = append(w.issued, v)
}

// secrets are every value that must never show: tokens handed out, the
// key's PEM body, the client secret, what the grants carried.
func (w *world) secrets() []string {
	w.issuedMu.Lock()
	vs := append([]string(nil), w.issued...)
	w.issuedMu.Unlock()
	var key struct {
		PrivateKey string `json:"private_key"`
	}
	if err := json.Unmarshal(w.google.KeyJSON(w.googleKeyURL), &key); err != nil {
		panic(err)
	}
	// Every line of the key's PEM body, and the PEM label.
	vs = append(vs, entraSecret, "PRIVATE KEY")
	for _, l := range strings.Split(key.PrivateKey, "\n") {
		if len(l) > 16 && !strings.HasPrefix(l, "-----") {
			vs = append(vs, l)
		}
	}
	vs = append(vs, w.gep.sentValues()...)
	return append(vs, w.eep.sentValues()...)
}
