package app

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// selfSigned writes a certificate for 127.0.0.1 and returns the files and
// a pool that trusts it.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7),
		Subject:      pkix.Name{CommonName: "scootgate-api-test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "api.crt"), filepath.Join(dir, "api.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestTLSListener: TLS 1.0/1.1 refused, 1.2/1.3 accepted, 1.2 with AEAD
// suites only, HTTP/2 offered, and a request works end to end over TLS
// (docs/operations.md "TLS").
func TestTLSListener(t *testing.T) {
	cf, kf, pool := selfSigned(t)
	s := startStack(t, stackOptions{tlsCert: cf, tlsKey: kf})
	addr := strings.TrimPrefix(s.api, "https://")
	for _, tt := range []struct {
		name    string
		version uint16
		ok      bool
	}{
		{"TLS 1.0", tls.VersionTLS10, false},
		{"TLS 1.1", tls.VersionTLS11, false},
		{"TLS 1.2", tls.VersionTLS12, true},
		{"TLS 1.3", tls.VersionTLS13, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, MinVersion: tt.version, MaxVersion: tt.version, NextProtos: []string{"h2", "http/1.1"}})
			if tt.ok != (err == nil) {
				t.Fatalf("handshake err = %v, want ok=%v", err, tt.ok)
			}
			if err == nil {
				if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
					t.Errorf("ALPN = %q, want h2", p)
				}
				c.Close()
			}
		})
	}
	// TLS 1.2 offers only ECDHE with an AEAD (Mozilla "intermediate"): a
	// client offering nothing else gets no session.
	for _, tt := range []struct {
		suite uint16
		ok    bool
	}{
		{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, true},
		{tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, true},
		{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, true},
		{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, false},
		{tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA, false},
		{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256, false},
	} {
		t.Run("TLS 1.2 "+tls.CipherSuiteName(tt.suite), func(t *testing.T) {
			c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tt.suite}})
			if tt.ok != (err == nil) {
				t.Fatalf("handshake err = %v, want ok=%v", err, tt.ok)
			}
			if err == nil {
				c.Close()
			}
		})
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, s.api+"/v1/chat/completions",
		strings.NewReader(`{"model":"demo-gpt","messages":[{"role":"user","content":"over tls"}]}`))
	req.Header.Set("Authorization", "Bearer "+clientKey)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.ProtoMajor != 2 {
		t.Fatalf("status %d proto %s, want 200 over HTTP/2", resp.StatusCode, resp.Proto)
	}
}

// TestInsecurePlaintextOptInIsVisible: the explicit plaintext opt-in is
// logged at start and shown on /readyz (docs/operations.md "TLS").
func TestInsecurePlaintextOptInIsVisible(t *testing.T) {
	s := startStack(t, stackOptions{insecurePlaintext: true})
	s.logs.mustContain(t, "insecure_plaintext") // logged before the listeners open
	resp, err := http.Get(s.health + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `"details":{"listen":"API listener serves plaintext HTTP by explicit opt-in`) {
		t.Fatalf("/readyz does not show the opt-in: %s", body)
	}
}
