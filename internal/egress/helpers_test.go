package egress

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/devstack/connectproxy"
	"github.com/scootgate/scootgate/internal/devstack/socks5proxy"
	"github.com/scootgate/scootgate/internal/secret"
)

// Credentials used by the in-process proxies. The passwords are canaries:
// no error text may contain them (or their Basic encoding).
const (
	proxyUser     = "sguser"
	proxyPass     = "canary-proxy-pw-7f3a"
	wrongPass     = "canary-wrong-pw-91bd"
	tinyWrongPass = "canary-tiny-wrong-c0de"
)

// target is an httptest provider that counts connections and requests.
type target struct {
	*httptest.Server
	conns    atomic.Int64
	requests atomic.Int64
}

// newTarget starts a loopback provider answering "ok", over TLS or not.
func newTarget(t *testing.T, withTLS bool) *target {
	t.Helper()
	tg := &target{}
	tg.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tg.requests.Add(1)
		io.WriteString(w, "ok")
	}))
	tg.Config.ErrorLog = log.New(io.Discard, "", 0) // aborted handshakes are expected
	tg.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			tg.conns.Add(1)
		}
	}
	if withTLS {
		tg.StartTLS()
	} else {
		tg.Start()
	}
	t.Cleanup(tg.Close)
	return tg
}

// pool returns a cert pool trusting the target's certificate (empty for a
// plain target).
func (tg *target) pool() *x509.CertPool {
	p := x509.NewCertPool()
	if c := tg.Certificate(); c != nil {
		p.AddCert(c)
	}
	return p
}

func startSOCKS(t *testing.T, o socks5proxy.Options) (*socks5proxy.Server, string) {
	t.Helper()
	s, addr, err := socks5proxy.Listen("127.0.0.1:0", o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, addr
}

func startConnect(t *testing.T, o connectproxy.Options) (*connectproxy.Server, string) {
	t.Helper()
	s, addr, err := connectproxy.Listen("127.0.0.1:0", o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, addr
}

// startConnectTLS serves a CONNECT proxy behind TLS with a fresh self-signed
// certificate for 127.0.0.1, and returns a pool that trusts it.
func startConnectTLS(t *testing.T, o connectproxy.Options) (*connectproxy.Server, string, *x509.CertPool) {
	t.Helper()
	cert, pool := selfSigned(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := connectproxy.New(o)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.Serve(tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}))
	}()
	t.Cleanup(func() {
		s.Close()
		wg.Wait()
	})
	return s, l.Addr().String(), pool
}

// selfSigned makes a self-signed ECDSA certificate for 127.0.0.1.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "egress test proxy"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// silentListener accepts connections and never answers; they stay open
// until the test ends.
func silentListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		wg.Wait()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

func mustURL(t testing.TB, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func newDialer(t *testing.T, o Options) *Dialer {
	t.Helper()
	d, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// get fetches u through d's transport and returns the body.
func get(t *testing.T, d *Dialer, u string) (*http.Response, string, error) {
	t.Helper()
	tr := d.Transport()
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

// notSent asserts err is a *NotSentError and returns it.
func notSent(t *testing.T, err error) *NotSentError {
	t.Helper()
	var nse *NotSentError
	if !errors.As(err, &nse) {
		t.Fatalf("error %v (%T) is not a *NotSentError", err, err)
	}
	return nse
}

// assertNoSecrets fails if err's text contains any test password.
func assertNoSecrets(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	msg := err.Error()
	for _, pw := range []string{proxyPass, wrongPass, tinyWrongPass, "sgpass"} {
		basic := base64.StdEncoding.EncodeToString([]byte(proxyUser + ":" + pw))
		if strings.Contains(msg, pw) || strings.Contains(msg, basic) {
			t.Errorf("error text leaks a proxy password: %q", msg)
		}
	}
}

func pass(s string) secret.Secret { return secret.New(s) }
