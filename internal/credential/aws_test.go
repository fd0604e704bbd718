package credential

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/scootgate/scootgate/internal/secret"
)

func testKeys() *AWS {
	return &AWS{AccessKeyID: secret.New("AKIDEXAMPLE"), SecretAccessKey: secret.New("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"), SessionToken: secret.New("token-canary")}
}

func signedRequest(t testing.TB, s *SigV4, parts [][]byte) *http.Request {
	t.Helper()
	r, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "https://bedrock-runtime.us-east-1.amazonaws.com/model/x/invoke", bytes.NewReader(bytes.Join(parts, nil)))
	if err != nil {
		t.Fatal(err)
	}
	r.URL.RawPath = "/model/a%3A0/invoke"
	r.URL.Path = "/model/a:0/invoke"
	r.Header.Set("Content-Type", "application/json")
	if err := s.Sign(r, parts); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestSigV4PayloadHash: the signature covers the body's exact bytes, in
// however many pieces they are sent, and the session token; an empty key
// signs nothing.
func TestSigV4PayloadHash(t *testing.T) {
	at := time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)
	s := testKeys().Signer("bedrock", "us-east-1", func() time.Time { return at })
	whole := signedRequest(t, s, [][]byte{[]byte(`{"a":1,"b":2}`)})
	pieces := signedRequest(t, s, [][]byte{[]byte(`{"a":1,`), []byte(`"b":2}`)})
	other := signedRequest(t, s, [][]byte{[]byte(`{"a":1,"b":3}`)})
	if whole.Header.Get("Authorization") != pieces.Header.Get("Authorization") {
		t.Error("the same bytes in pieces signed differently")
	}
	if whole.Header.Get("Authorization") == other.Header.Get("Authorization") {
		t.Error("a different body signed the same")
	}
	auth := whole.Header.Get("Authorization")
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261206/us-east-1/bedrock/aws4_request, ") {
		t.Errorf("Authorization = %s", auth)
	}
	if whole.Header.Get("X-Amz-Security-Token") != "token-canary" || whole.Header.Get("X-Amz-Date") != "20261206T050000Z" {
		t.Errorf("headers %v", whole.Header)
	}
	empty := (&AWS{AccessKeyID: secret.New("AKIDEXAMPLE")}).Signer("bedrock", "us-east-1", time.Now)
	r, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, "https://x.example/", nil)
	if err := empty.Sign(r, nil); err != ErrNoKeys {
		t.Errorf("err = %v, want ErrNoKeys", err)
	}
}

// BenchmarkSigV4 is the signature of one request with a 2 KiB body.
func BenchmarkSigV4(b *testing.B) {
	s := testKeys().Signer("bedrock", "us-east-1", time.Now)
	body := [][]byte{bytes.Repeat([]byte("x"), 2048)}
	b.ReportAllocs()
	for b.Loop() {
		r, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, "https://bedrock-runtime.us-east-1.amazonaws.com/model/a%3A0/invoke", nil)
		r.ContentLength = 2048
		r.Header.Set("Content-Type", "application/json")
		if err := s.Sign(r, body); err != nil {
			b.Fatal(err)
		}
	}
}
