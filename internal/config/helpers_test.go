package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io/fs"
	"math/big"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/scootgate/scootgate/internal/secret"
)

// cmpOpts compares secrets by a digest of their value, so that a diff shows
// digests, never values, and URLs by their string form.
var cmpOpts = cmp.Options{
	cmp.Transformer("digest", func(s secret.Secret) string {
		return fmt.Sprintf("sha256:%x", sha256.Sum256([]byte(s.Reveal())))[:19]
	}),
	cmp.Comparer(func(a, b *url.URL) bool {
		if a == nil || b == nil {
			return a == b
		}
		return a.String() == b.String()
	}),
}

// fakeEnv is a getenv over a map.
func fakeEnv(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// fakeFS is a readFile over a map; a missing path fails like os.ReadFile.
func fakeFS(m map[string]string) func(string) ([]byte, error) {
	return func(p string) ([]byte, error) {
		v, ok := m[p]
		if !ok {
			return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
		}
		return []byte(v), nil
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// edit replaces old with new in doc; old must occur exactly once so that a
// stale test edit fails loudly instead of testing the base document.
func edit(t *testing.T, doc string, pairs ...string) string {
	t.Helper()
	if len(pairs)%2 != 0 {
		t.Fatalf("edit: odd number of arguments")
	}
	for i := 0; i < len(pairs); i += 2 {
		if n := strings.Count(doc, pairs[i]); n != 1 {
			t.Fatalf("edit: %q occurs %d times in the document, want 1", pairs[i], n)
		}
		doc = strings.Replace(doc, pairs[i], pairs[i+1], 1)
	}
	return doc
}

// testPEM holds a self-signed certificate, its key, and an unrelated key.
type testPEM struct {
	cert, key, otherKey string
}

var pems = sync.OnceValue(func() testPEM {
	newKey := func() (*ecdsa.PrivateKey, string) {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic(err)
		}
		der, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			panic(err)
		}
		return k, string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
	}
	k, keyPEM := newKey()
	_, otherPEM := newKey()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "scootgate test"},
		DNSNames:              []string{"localhost"},
		NotBefore:             time.Unix(0, 0),
		NotAfter:              time.Unix(1<<33, 0),
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		panic(err)
	}
	return testPEM{
		cert:     string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		key:      keyPEM,
		otherKey: otherPEM,
	}
})
