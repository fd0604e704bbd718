package faketoken

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// DemoServiceAccount is the demo service account's email when
// GoogleOptions.Email is "".
const DemoServiceAccount = "scootgate-demo@scootgate-demo.iam.gserviceaccount.com"

// JWTBearerGrant is the grant_type of the JWT bearer grant (RFC 7523).
const JWTBearerGrant = "urn:ietf:params:oauth:grant-type:jwt-bearer"

// GoogleOptions configure a fake Google token endpoint.
type GoogleOptions struct {
	Options
	// Key is the demo service account's key; nil = a fresh 2048-bit key.
	Key *rsa.PrivateKey
	// Email is the service account; "" = DemoServiceAccount.
	Email string
}

// Google is a fake Google OAuth 2 token endpoint for one demo service
// account. It serves the grant at any path: the audience it requires is
// the URL the grant was posted to, as Google requires its token_uri.
type Google struct {
	*Issuer
	// immutable
	key   *rsa.PrivateKey
	keyID string
	email string
}

// NewGoogle returns the endpoint and its demo service account.
func NewGoogle(o GoogleOptions) (*Google, error) {
	g := &Google{Issuer: newIssuer("ya29.fake-", o.Options), key: o.Key, email: o.Email}
	if g.key == nil {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return nil, fmt.Errorf("faketoken: generate the demo service-account key: %w", err)
		}
		g.key = k
	}
	if g.email == "" {
		g.email = DemoServiceAccount
	}
	der, err := x509.MarshalPKIXPublicKey(&g.key.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("faketoken: demo key: %w", err)
	}
	sum := sha256.Sum256(der)
	g.keyID = hex.EncodeToString(sum[:20])
	return g, nil
}

// KeyJSON returns the demo service account's key file, in the form the
// Google Cloud console downloads, naming tokenURL as its token_uri.
func (g *Google) KeyJSON(tokenURL string) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(g.key)
	if err != nil {
		panic(fmt.Sprintf("faketoken: marshal an RSA key: %v", err)) // cannot fail for an RSA key
	}
	b, _ := json.MarshalIndent(map[string]string{
		"type":                        "service_account",
		"project_id":                  "scootgate-demo",
		"private_key_id":              g.keyID,
		"private_key":                 string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email":                g.email,
		"client_id":                   "100000000000000000001",
		"auth_uri":                    "https://accounts.google.com/o/oauth2/auth",
		"token_uri":                   tokenURL,
		"auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
		"client_x509_cert_url":        "https://www.googleapis.com/robot/v1/metadata/x509/" + g.email,
		"universe_domain":             "googleapis.com",
	}, "", "  ")
	return b
}

// maxAssertionLife is the longest an assertion may live, as Google
// requires ("Token must be a short-lived token (60 minutes)").
const maxAssertionLife = time.Hour

// assertionSkew is how far an assertion's iat may be ahead of the clock.
const assertionSkew = 5 * time.Minute

// ServeHTTP answers a JWT bearer grant.
func (g *Google) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !form(w, r) || g.failing(w) {
		return
	}
	if gt := r.PostForm.Get("grant_type"); gt != JWTBearerGrant {
		refuse(w, http.StatusBadRequest, "unsupported_grant_type", "Invalid grant_type: "+gt)
		return
	}
	claims, ok := g.verify(r.PostForm.Get("assertion"))
	if !ok {
		refuse(w, http.StatusBadRequest, "invalid_grant", "Invalid JWT Signature.")
		return
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	now := g.now()
	iat, exp := time.Unix(claims.Iat, 0), time.Unix(claims.Exp, 0)
	switch {
	case claims.Iss != g.email:
		refuse(w, http.StatusBadRequest, "invalid_grant", "Invalid email or User ID")
	case claims.Aud != scheme+"://"+r.Host+r.URL.Path:
		refuse(w, http.StatusBadRequest, "invalid_grant", "Invalid JWT: Failed audience check.")
	case strings.TrimSpace(claims.Scope) == "":
		refuse(w, http.StatusBadRequest, "invalid_scope", "Empty or missing scope not allowed.")
	case !exp.After(iat) || exp.Sub(iat) > maxAssertionLife || !now.Before(exp) || iat.After(now.Add(assertionSkew)):
		refuse(w, http.StatusBadRequest, "invalid_grant",
			"Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim.")
	default:
		g.issue(w, nil)
	}
}

// claimSet is what the endpoint reads of an assertion (RFC 7523 section 3).
type claimSet struct {
	Iss   string `json:"iss"`
	Scope string `json:"scope"`
	Aud   string `json:"aud"`
	Exp   int64  `json:"exp"`
	Iat   int64  `json:"iat"`
}

// verify checks a compact JWS (RFC 7515 section 7.1): an RS256 header
// naming the demo key, and a PKCS #1 v1.5 SHA-256 signature by it over
// header.payload. It returns the payload's claims.
func (g *Google) verify(assertion string) (claimSet, bool) {
	var c claimSet
	parts := strings.Split(assertion, ".")
	if len(parts) != 3 {
		return c, false
	}
	var header struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	if !decodePart(parts[0], &header) || header.Alg != "RS256" || header.Kid != g.keyID {
		return c, false
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return c, false
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if rsa.VerifyPKCS1v15(&g.key.PublicKey, crypto.SHA256, digest[:], sig) != nil {
		return c, false
	}
	return c, decodePart(parts[1], &c)
}

// decodePart decodes a base64url JSON part of a JWS into v.
func decodePart(part string, v any) bool {
	b, err := base64.RawURLEncoding.DecodeString(part)
	return err == nil && json.Unmarshal(b, v) == nil
}
