package credential

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/jwt"

	"github.com/scootgate/scootgate/internal/secret"
)

// KindGCPServiceAccount is the gcp_service_account credential kind.
const KindGCPServiceAccount = "gcp_service_account"

// GoogleTokenURL is Google's OAuth 2 token endpoint, the one a
// service-account key names in token_uri (and the default when it names
// none).
const GoogleTokenURL = "https://oauth2.googleapis.com/token"

// DefaultGCPScope is the scope a gcp_service_account token asks for when
// none is configured: Vertex AI's.
const DefaultGCPScope = "https://www.googleapis.com/auth/cloud-platform"

// GCPOptions configure a gcp_service_account credential.
type GCPOptions struct {
	TokenOptions
	// Key is the service account's JSON key file, as the Google Cloud
	// console downloads it. It is read again at every grant, so a
	// rotated key file (a secret.Watcher) takes effect at the next one.
	Key secret.Secret
	// Scopes are the OAuth 2 scopes asked for; empty = DefaultGCPScope.
	Scopes []string
}

// NewGCPServiceAccount returns a minted-token credential that obtains
// access tokens for a Google Cloud service account by the OAuth 2 JWT
// bearer grant (RFC 7523), signed with the account's key
// (golang.org/x/oauth2/jwt). The token endpoint is the key's token_uri
// and must be https:// on one of o.Hosts. Errors name the credential and
// the problem, never the key's content.
func NewGCPServiceAccount(o GCPOptions) (*TokenSource, error) {
	scopes := o.Scopes
	if len(scopes) == 0 {
		scopes = []string{DefaultGCPScope}
	}
	for _, s := range scopes {
		if !headerSafe(s) {
			return nil, fmt.Errorf("credential %q: scope %q is not a scope (visible ASCII without spaces)", o.Name, s)
		}
	}
	return newTokenSource(gcpKind{key: o.Key, scopes: scopes}, o.TokenOptions)
}

// gcpKind is the gcp_service_account kind. Immutable.
type gcpKind struct {
	key    secret.Secret
	scopes []string
}

func (gcpKind) name() string { return KindGCPServiceAccount }

// detail: Google's error descriptions carry no documented error number.
func (gcpKind) detail(string) string { return "" }

func (k gcpKind) prepare() (string, func(context.Context, *http.Client) (*oauth2.Token, error), error) {
	sa, err := parseServiceAccount(k.key.Reveal())
	if err != nil {
		return "", nil, err
	}
	cfg := &jwt.Config{
		Email:        sa.ClientEmail,
		PrivateKey:   []byte(sa.PrivateKey),
		PrivateKeyID: sa.PrivateKeyID,
		Scopes:       k.scopes,
		TokenURL:     sa.TokenURI,
	}
	mint := func(ctx context.Context, hc *http.Client) (*oauth2.Token, error) {
		return cfg.TokenSource(context.WithValue(ctx, oauth2.HTTPClient, hc)).Token()
	}
	return sa.TokenURI, mint, nil
}

// serviceAccount is what the node reads from a service-account key file.
// Other members (project_id, client_id, auth_uri, universe_domain…) are
// ignored: Google adds members to the format, and the grant needs none of
// them.
type serviceAccount struct {
	Type         string `json:"type"`
	ClientEmail  string `json:"client_email"`
	PrivateKey   string `json:"private_key"`
	PrivateKeyID string `json:"private_key_id"`
	TokenURI     string `json:"token_uri"`
}

// parseServiceAccount reads and checks a key file. Its errors quote member
// names, never values: the file is a secret.
func parseServiceAccount(v string) (serviceAccount, error) {
	var sa serviceAccount
	if v == "" {
		return sa, errors.New("service-account key is empty")
	}
	if err := json.Unmarshal([]byte(v), &sa); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return sa, fmt.Errorf("service-account key is not JSON (syntax error at byte %d)", se.Offset)
		case errors.As(err, &te) && te.Field != "":
			return sa, fmt.Errorf("service-account key member %q is not a string", te.Field)
		default:
			return sa, errors.New("service-account key is not a JSON object")
		}
	}
	switch {
	case sa.Type != "service_account":
		return sa, errors.New(`service-account key: "type" is not "service_account" (a user or external-account credential file is not a service-account key)`)
	case sa.ClientEmail == "":
		return sa, errors.New(`service-account key: "client_email" is missing`)
	case sa.PrivateKey == "":
		return sa, errors.New(`service-account key: "private_key" is missing`)
	}
	if err := checkRSAKey(sa.PrivateKey); err != nil {
		return sa, fmt.Errorf(`service-account key: "private_key" %w`, err)
	}
	if sa.TokenURI == "" {
		sa.TokenURI = GoogleTokenURL
	}
	return sa, nil
}

// checkRSAKey checks that pemKey is an RSA private key in PEM (PKCS #8, as
// Google issues them, or PKCS #1), as x/oauth2/jwt reads it at each grant.
func checkRSAKey(pemKey string) error {
	block, _ := pem.Decode([]byte(pemKey))
	if block == nil {
		return errors.New("is not PEM")
	}
	if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		if _, ok := k.(*rsa.PrivateKey); !ok {
			return errors.New("is not an RSA key")
		}
		return nil
	}
	if _, err := x509.ParsePKCS1PrivateKey(block.Bytes); err != nil {
		return errors.New("is not an RSA private key in PKCS #8 or PKCS #1")
	}
	return nil
}
