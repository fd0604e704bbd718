package credential

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/scootgate/scootgate/internal/secret"
)

// KindAzureEntra is the azure_entra credential kind.
const KindAzureEntra = "azure_entra"

// EntraAuthorityHost is Microsoft Entra ID's global authority; sovereign
// clouds have their own (https://login.microsoftonline.us,
// https://login.chinacloudapi.cn).
const EntraAuthorityHost = "https://login.microsoftonline.com"

// DefaultAzureScope is the scope an azure_entra token asks for when none
// is configured: Azure OpenAI's (Azure AI services).
const DefaultAzureScope = "https://cognitiveservices.azure.com/.default"

// AzureOptions configure an azure_entra credential.
type AzureOptions struct {
	TokenOptions
	// TenantID is the Entra tenant (directory) id, a GUID, or one of its
	// domain names ("contoso.onmicrosoft.com").
	TenantID string
	// ClientID is the application (client) id, a GUID.
	ClientID string
	// ClientSecret is the application's client secret. It is read at
	// every grant, so a rotated secret file takes effect at the next one.
	ClientSecret secret.Secret
	// Scopes are asked for; empty = DefaultAzureScope.
	Scopes []string
	// AuthorityHost is https://HOST[:PORT] of the Entra authority; "" =
	// EntraAuthorityHost. The token endpoint is
	// AuthorityHost/TenantID/oauth2/v2.0/token.
	AuthorityHost string
}

// NewAzureEntra returns a minted-token credential that obtains Microsoft
// Entra ID access tokens for an application by the OAuth 2 client
// credentials grant (golang.org/x/oauth2/clientcredentials, the secret in
// the request body as Entra documents it). The token endpoint must be on
// one of o.Hosts. Errors name the credential and the problem, never the
// secret or a value that might be one.
func NewAzureEntra(o AzureOptions) (*TokenSource, error) {
	fail := func(format string, args ...any) (*TokenSource, error) {
		return nil, fmt.Errorf("credential %q: "+format, append([]any{o.Name}, args...)...)
	}
	authority := o.AuthorityHost
	if authority == "" {
		authority = EntraAuthorityHost
	}
	u, err := url.Parse(authority)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return fail("authority host must be https://HOST[:PORT], without path or userinfo")
	}
	switch {
	case !tenantRE.MatchString(o.TenantID):
		return fail("tenant id must be the directory's GUID or one of its domain names")
	case entraMultiTenant[strings.ToLower(o.TenantID)]:
		return fail("tenant id %q names no tenant; the client credentials grant needs the application's own tenant", o.TenantID)
	case !guidRE.MatchString(o.ClientID):
		// Not quoted: a secret pasted in the wrong field must not reach a log.
		return fail("client id must be the application (client) id, a GUID")
	case o.ClientSecret.IsZero():
		return fail("client secret is empty")
	}
	scopes := o.Scopes
	if len(scopes) == 0 {
		scopes = []string{DefaultAzureScope}
	}
	for _, s := range scopes {
		if !headerSafe(s) {
			return fail("scope %q is not a scope (visible ASCII without spaces)", s)
		}
	}
	k := azureKind{
		tokenURL: strings.TrimSuffix(authority, "/") + "/" + url.PathEscape(o.TenantID) + "/oauth2/v2.0/token",
		clientID: o.ClientID,
		secret:   o.ClientSecret,
		scopes:   scopes,
	}
	return newTokenSource(k, o.TokenOptions)
}

var (
	guidRE   = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	tenantRE = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z.-]{0,252}$`)
	// aadstsRE finds Entra's error number in an error description
	// ("AADSTS7000215: Invalid client secret provided…").
	aadstsRE = regexp.MustCompile(`\bAADSTS[0-9]{1,9}\b`)
	// entraMultiTenant are the authority paths that name no single tenant.
	entraMultiTenant = map[string]bool{"common": true, "organizations": true, "consumers": true}
)

// azureKind is the azure_entra kind. Immutable.
type azureKind struct {
	tokenURL string
	clientID string
	secret   secret.Secret
	scopes   []string
}

func (azureKind) name() string { return KindAzureEntra }

// detail keeps Entra's AADSTS error number, which Microsoft documents
// ("AADSTS7000215": invalid client secret), and nothing else of the
// description.
func (azureKind) detail(desc string) string { return aadstsRE.FindString(desc) }

func (k azureKind) prepare() (string, func(context.Context, *http.Client) (*oauth2.Token, error), error) {
	v := k.secret.Reveal()
	switch {
	case v == "":
		return "", nil, errors.New("client secret is empty")
	case strings.ContainsFunc(v, func(c rune) bool { return c < 0x20 || c == 0x7f }):
		return "", nil, fmt.Errorf("client secret %w", secret.ErrControl)
	}
	cfg := &clientcredentials.Config{
		ClientID:     k.clientID,
		ClientSecret: v,
		TokenURL:     k.tokenURL,
		Scopes:       k.scopes,
		AuthStyle:    oauth2.AuthStyleInParams,
	}
	mint := func(ctx context.Context, hc *http.Client) (*oauth2.Token, error) {
		return cfg.Token(context.WithValue(ctx, oauth2.HTTPClient, hc))
	}
	return k.tokenURL, mint, nil
}
