package snapshot_test

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"

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

	o, err := snapshot.ConfigHTTPOptions(config.ControlPlane{Token: secret.New("t")})
	if err != nil || o.TLS != nil || o.Token.Reveal() != "t" {
		t.Errorf("token only: %+v, %v", o, err)
	}
	o, err = snapshot.ConfigHTTPOptions(config.ControlPlane{
		CAFile: certFile, ClientCertFile: certFile, ClientKeyFile: keyFile, LongPoll: 30e9,
	})
	if err != nil {
		t.Fatal(err)
	}
	if o.TLS == nil || o.TLS.RootCAs == nil || len(o.TLS.Certificates) != 1 || o.LongPoll != 30e9 {
		t.Errorf("full: %+v", o)
	}
	for name, cp := range map[string]config.ControlPlane{
		"missing CA":       {CAFile: filepath.Join(dir, "nope.pem")},
		"CA without PEM":   {CAFile: junk},
		"mismatched pair":  {ClientCertFile: certFile, ClientKeyFile: junk},
		"missing key file": {ClientCertFile: certFile, ClientKeyFile: filepath.Join(dir, "nope.pem")},
	} {
		if _, err := snapshot.ConfigHTTPOptions(cp); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
