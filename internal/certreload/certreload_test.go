package certreload

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/clock"
)

// writePair writes a fresh self-signed pair for 127.0.0.1 with the given
// serial and stamps both files with mod (so size+mtime change detection
// does not depend on the filesystem's timestamp granularity).
func writePair(t *testing.T, dir string, serial int64, mod time.Time) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "scootgate-test"},
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
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{certFile, keyFile} {
		if err := os.Chtimes(f, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile
}

// serve runs a TLS echo server using r and returns its address. The
// test's cleanup closes the listener and every accepted connection and
// waits for the server's goroutines.
func serve(t *testing.T, r *Reloader) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{GetCertificate: r.GetCertificate, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		conns  []net.Conn
		closed bool
	)
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		closed = true
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if closed {
				mu.Unlock()
				c.Close()
				return
			}
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				buf := make([]byte, 1)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
					if _, err := c.Write(buf); err != nil {
						return
					}
				}
			})
		}
	})
	return ln.Addr().String()
}

func dialSerial(t *testing.T, addr string) (*tls.Conn, int64) {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test inspects the served certificate itself
	if err != nil {
		t.Fatal(err)
	}
	return c, c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

func TestReloadOnChange(t *testing.T) {
	dir := t.TempDir()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cf, kf := writePair(t, dir, 1, base)
	clk := clock.NewFake(time.Time{})
	var errs []error
	r, err := New(Options{CertFile: cf, KeyFile: kf, Clock: clk.Now, OnError: func(err error) { errs = append(errs, err) }})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, r)

	old, serial := dialSerial(t, addr)
	defer old.Close()
	if serial != 1 {
		t.Fatalf("serial = %d, want 1", serial)
	}

	writePair(t, dir, 2, base.Add(time.Minute))
	if _, serial := dialSerial(t, addr); serial != 1 {
		t.Fatalf("reloaded before CheckEvery passed: serial %d", serial)
	}
	clk.Advance(2 * time.Second)
	c, serial := dialSerial(t, addr)
	c.Close()
	if serial != 2 {
		t.Fatalf("after renewal serial = %d, want 2", serial)
	}
	// The connection made before the renewal still works.
	if _, err := old.Write([]byte("x")); err != nil {
		t.Fatalf("old connection broken by the reload: %v", err)
	}
	if _, err := old.Read(make([]byte, 1)); err != nil {
		t.Fatalf("old connection broken by the reload: %v", err)
	}

	// A broken renewal keeps the previous pair and reports why.
	if err := os.WriteFile(cf, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Second)
	c, serial = dialSerial(t, addr)
	c.Close()
	if serial != 2 {
		t.Fatalf("broken renewal: serial = %d, want the previous 2", serial)
	}
	if len(errs) == 0 {
		t.Fatal("broken renewal was not reported")
	}
}

func TestNewFailsOnMissingFiles(t *testing.T) {
	_, err := New(Options{CertFile: "/nonexistent/cert.pem", KeyFile: "/nonexistent/key.pem"})
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v, want not-exist", err)
	}
}
