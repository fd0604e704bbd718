package snapshot_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/clock"
	"github.com/scootgate/scootgate/internal/config"
	"github.com/scootgate/scootgate/internal/secret"
	"github.com/scootgate/scootgate/internal/snapshot"
)

func TestConfigHTTPOptions(t *testing.T) {
	dir := t.TempDir()
	cert := clientCert(t)
	keyDER, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]})
	certFile := write("cert.pem", certPEM)
	keyFile := write("key.pem", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
	junk := write("junk.pem", []byte("junk"))

	o, err := snapshot.ConfigHTTPOptions(config.ControlPlane{Token: secret.New("t")}, nil)
	if err != nil || o.TLS != nil || o.Token.Reveal() != "t" {
		t.Errorf("token only: %+v, %v", o, err)
	}
	o, err = snapshot.ConfigHTTPOptions(config.ControlPlane{
		CAFile: certFile, ClientCertFile: certFile, ClientKeyFile: keyFile, LongPoll: 30e9,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.TLS == nil || o.TLS.RootCAs == nil || o.TLS.GetClientCertificate == nil || o.LongPoll != 30e9 {
		t.Errorf("full: %+v", o)
	}
	for name, cp := range map[string]config.ControlPlane{
		"missing CA":       {CAFile: filepath.Join(dir, "nope.pem")},
		"CA without PEM":   {CAFile: junk},
		"mismatched pair":  {ClientCertFile: certFile, ClientKeyFile: junk},
		"missing key file": {ClientCertFile: certFile, ClientKeyFile: filepath.Join(dir, "nope.pem")},
	} {
		if _, err := snapshot.ConfigHTTPOptions(cp, nil); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// writeClientPair writes a self-signed client certificate with serial
// and its key to dir, both stamped with mod (so that change detection
// does not depend on the filesystem's timestamp granularity).
func writeClientPair(t *testing.T, dir string, serial int64, mod time.Time) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "scootgate-node"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	writeStamped(t, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), mod)
	writeStamped(t, keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), mod)
	return certFile, keyFile
}

func writeStamped(t *testing.T, path string, data []byte, mod time.Time) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mod, mod); err != nil {
		t.Fatal(err)
	}
}

// TestClientCertReload: the control-plane client certificate follows its
// files; a renewed pair is presented on the next connection, a broken
// one is logged and the previous pair stays in use.
func TestClientCertReload(t *testing.T) {
	var (
		mu     sync.Mutex
		serial int64
	)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		serial = r.TLS.PeerCertificates[0].SerialNumber.Int64()
		mu.Unlock()
		_, _ = io.WriteString(w, "doc")
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAnyClientCert}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	writeStamped(t, ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), time.Now())
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	certFile, keyFile := writeClientPair(t, dir, 1, base)
	clk := clock.NewFake(base)
	var logs bytes.Buffer
	o, err := snapshot.ConfigHTTPOptionsClock(config.ControlPlane{CAFile: ca, ClientCertFile: certFile, ClientKeyFile: keyFile},
		slog.New(slog.NewTextHandler(&syncWriter{w: &logs}, nil)), clk)
	if err != nil {
		t.Fatal(err)
	}
	src := sourceFor(t, srv.URL+"/v1/routes", o)
	presented := func() int64 {
		t.Helper()
		src.CloseIdleConnections() // the certificate is chosen per handshake
		if _, _, err := src.Fetch(t.Context()); err != nil {
			t.Fatal(err)
		}
		src.Forget()
		mu.Lock()
		defer mu.Unlock()
		return serial
	}
	if got := presented(); got != 1 {
		t.Fatalf("serial %d, want 1", got)
	}
	writeClientPair(t, dir, 2, base.Add(time.Minute))
	clk.Advance(2 * time.Second)
	if got := presented(); got != 2 {
		t.Fatalf("after renewal: serial %d, want 2", got)
	}
	writeStamped(t, certFile, []byte("half-written"), base.Add(2*time.Minute))
	clk.Advance(2 * time.Second)
	if got := presented(); got != 2 {
		t.Fatalf("after a broken renewal: serial %d, want 2 (the previous pair)", got)
	}
	if !strings.Contains(logs.String(), "not reloaded") {
		t.Errorf("broken renewal not logged:\n%s", logs.String())
	}
}
