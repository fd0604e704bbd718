// Package catalog lists the provider APIs the node serves, and through
// them every endpoint, by Endpoint and by client path. Adding a provider
// API is one folder under internal/provider and one line in apis
// (docs/architecture.md "Adding a provider API").
package catalog

import (
	"net/http"
	"slices"

	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/provider/anthropic"
	"github.com/scootgate/scootgate/internal/provider/converse"
	"github.com/scootgate/scootgate/internal/provider/gemini"
	"github.com/scootgate/scootgate/internal/provider/openai"
)

// apis lists the provider APIs, the default shape first: it answers the
// requests no API claims.
var apis = []*provider.API{
	openai.API,
	anthropic.API,
	gemini.API,
	converse.API,
}

// Indexes built from apis once; read-only afterwards.
var (
	byProtocol [provider.NumProtocols]*provider.API
	byEndpoint [provider.NumEndpoints]*provider.Spec
	keyHeaders []string
	keyQueries []string
)

func init() {
	for _, a := range apis {
		byProtocol[a.Protocol] = a
		for _, s := range a.Endpoints {
			byEndpoint[s.Endpoint] = s
		}
	}
	// The key headers: the other APIs' in order, then the default's,
	// whose api-key is the most generic name (and came last before the
	// APIs declared their headers).
	for _, a := range append(apis[1:len(apis):len(apis)], apis[0]) {
		for _, h := range a.KeyHeaders {
			if !slices.Contains(keyHeaders, h) {
				keyHeaders = append(keyHeaders, h)
			}
		}
		if a.QueryKey != "" && !slices.Contains(keyQueries, a.QueryKey) {
			keyQueries = append(keyQueries, a.QueryKey)
		}
	}
}

// KeyHeaders returns every API's key headers (provider.API.KeyHeaders),
// in the order of the APIs, the default's last, and then of each API's
// list, each once: where
// the node looks for a client's key after Authorization: Bearer
// (docs/authorization.md "Presenting a key"). The slice is shared: do
// not modify it.
func KeyHeaders() []string { return keyHeaders }

// KeyQueries returns the query parameters in which some API's clients
// present their key (provider.API.QueryKey), each once. The slice is
// shared: do not modify it.
func KeyQueries() []string { return keyQueries }

// APIs returns every provider API, the default first. The slice is shared:
// do not modify it.
func APIs() []*provider.API { return apis }

// API returns the provider API of protocol p.
func API(p provider.Protocol) *provider.API { return byProtocol[p] }

// Spec returns the description of e.
func Spec(e provider.Endpoint) *provider.Spec { return byEndpoint[e] }

// ByPath returns the endpoint whose client path is path, or nil, and
// the model the path names for an endpoint whose path names one
// (provider.Spec.Match).
func ByPath(path string) (spec *provider.Spec, model string) {
	for _, s := range byEndpoint {
		if s.Path != "" && (s.Path == path || slices.Contains(s.AlsoPaths, path)) {
			return s, ""
		}
	}
	for _, s := range byEndpoint {
		if s.Match != nil {
			if m, ok := s.Match(path); ok {
				return s, m
			}
		}
	}
	return nil, ""
}

// ByDoor returns the endpoint one of whose doors is escapedPath (the
// path as the client sent it, provider.Door.Match), and the name of that
// door's platform ("bedrock"); nil when no door matches.
func ByDoor(escapedPath string) (*provider.Spec, string) {
	for _, a := range apis {
		for _, s := range a.Endpoints {
			for _, d := range s.Doors {
				if _, _, ok, _ := d.Match(escapedPath); ok {
					return s, d.Platform.Name(a.Protocol)
				}
			}
		}
	}
	return nil, ""
}

// Claiming returns the API whose clients send a request that is not for
// an endpoint (the model list, an unknown path): the first that claims
// it, else the default.
func Claiming(r *http.Request) *provider.API {
	for _, a := range apis[1:] {
		if a.Claims(r) {
			return a
		}
	}
	return apis[0]
}

// ModelsPath reports whether path is a model list path of some API
// (provider.API.ModelsPaths), and the model it names when it asks for one
// ("" for the list).
func ModelsPath(path string) (name string, ok bool) {
	for _, a := range apis {
		for _, base := range a.ModelsPaths {
			if path == base {
				return "", true
			}
			if len(path) > len(base)+1 && path[len(base)] == '/' && path[:len(base)] == base {
				return path[len(base)+1:], true
			}
		}
	}
	return "", false
}
