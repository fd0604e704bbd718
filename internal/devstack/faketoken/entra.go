package faketoken

import (
	"crypto/subtle"
	"net/http"
)

// EntraScope is the one scope the fake Entra tenant grants: Azure
// OpenAI's.
const EntraScope = "https://cognitiveservices.azure.com/.default"

// EntraOptions configure a fake Entra tenant.
type EntraOptions struct {
	Options
	// Tenant is the tenant id in the token endpoint's path.
	Tenant string
	// ClientID and ClientSecret are the one application's credentials.
	ClientID, ClientSecret string
}

// Entra is a fake Microsoft Entra ID tenant's token endpoint,
// /{tenant}/oauth2/v2.0/token, for one application. The secret is taken
// from the body only (client_secret_post), as the node sends it.
type Entra struct {
	*Issuer
	// immutable
	path             string
	clientID, secret string
}

// NewEntra returns the endpoint.
func NewEntra(o EntraOptions) *Entra {
	return &Entra{
		Issuer:   newIssuer("fake-entra.", o.Options),
		path:     "/" + o.Tenant + "/oauth2/v2.0/token",
		clientID: o.ClientID,
		secret:   o.ClientSecret,
	}
}

// ServeHTTP answers a client credentials grant; refusals carry the AADSTS
// numbers Entra uses for them.
func (e *Entra) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != e.path {
		refuse(w, http.StatusBadRequest, "invalid_request", "AADSTS90002: Tenant not found.")
		return
	}
	if !form(w, r) || e.failing(w) {
		return
	}
	f := r.PostForm
	switch {
	case f.Get("grant_type") != "client_credentials":
		refuse(w, http.StatusBadRequest, "unsupported_grant_type", "AADSTS70003: The app requested an unsupported grant type.")
	case f.Get("client_id") != e.clientID:
		refuse(w, http.StatusBadRequest, "unauthorized_client", "AADSTS700016: Application was not found in the directory.")
	case subtle.ConstantTimeCompare([]byte(f.Get("client_secret")), []byte(e.secret)) != 1:
		refuse(w, http.StatusUnauthorized, "invalid_client", "AADSTS7000215: Invalid client secret provided.")
	case f.Get("scope") != EntraScope:
		refuse(w, http.StatusBadRequest, "invalid_scope", "AADSTS70011: The provided value for the input parameter 'scope' is not valid.")
	default:
		e.issue(w, map[string]any{"ext_expires_in": int64(e.lifetime.Seconds())})
	}
}
