package fakeprovider

import (
	"net/http"
	"strings"
)

// AzureAuth says whether a request to the Azure paths is authorised:
// [Options.AzureKey] as api-key, or what AzureToken accepts as
// Authorization: Bearer (a live token of a faketoken.Entra).
type AzureAuth func(r *http.Request) bool

// azurePaths are the OpenAI paths the Azure surfaces serve, under
// /openai/deployments/{deployment} (with an api-version) and /openai/v1.
var azurePaths = []string{"/chat/completions", "/completions", "/embeddings"}

// azureRoute maps an Azure OpenAI path to the OpenAI path it carries:
// /openai/deployments/{d}/chat/completions, /openai/responses (both need
// an api-version query) and /openai/v1/… (none). deployment is the path's
// deployment, "" on the others; ok is false for a path that is no Azure
// one.
func azureRoute(r *http.Request) (path, deployment string, versioned, ok bool) {
	p := r.URL.Path
	if rest, found := strings.CutPrefix(p, "/openai/v1/"); found {
		return "/v1/" + rest, "", false, true
	}
	if p == "/openai/responses" {
		return "/v1/responses", "", true, true
	}
	rest, found := strings.CutPrefix(p, "/openai/deployments/")
	if !found {
		return "", "", false, false
	}
	d, op, found := strings.Cut(rest, "/")
	if !found || d == "" {
		return "", "", false, false
	}
	for _, a := range azurePaths {
		if "/"+op == a {
			return "/v1" + a, d, true, true
		}
	}
	return "", "", false, false
}

// serveAzure checks an Azure request's api-version and credential and,
// when they pass, points r at the OpenAI path it carries and returns
// true; otherwise it answers as Azure does and returns false.
func (p *Provider) serveAzure(w http.ResponseWriter, r *http.Request, path string, versioned bool) bool {
	fail := func(status int, code, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"error":{"code":"` + code + `","message":"` + msg + `"}}`))
	}
	if versioned && r.URL.Query().Get("api-version") == "" {
		fail(http.StatusBadRequest, "404", "Missing required query parameter: api-version")
		return false
	}
	keyOK := p.o.AzureKey != "" && same(r.Header.Get("api-key"), p.o.AzureKey)
	tokenOK := p.o.AzureToken != nil && p.o.AzureToken(r)
	if !keyOK && !tokenOK {
		fail(http.StatusUnauthorized, "401", "Access denied due to invalid subscription key or wrong API endpoint.")
		return false
	}
	r.URL.Path = path
	return true
}
