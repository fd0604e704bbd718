package provider

import (
	"io"
	"net/http"
	"net/url"
)

// Platform is how a backend's protocol travels to its provider
// (docs/routing.md "Platforms"): on the protocol's own wire (first party,
// or a provider compatible with it), or inside a cloud platform's
// envelope. A platform is a transport, never a conversion: the client
// speaks the protocol either way.
type Platform uint8

const (
	// FirstParty is the protocol's own wire: what every backend was
	// before platforms, and what a backend that names none is.
	FirstParty Platform = iota
	// Bedrock is Amazon Bedrock Runtime (Anthropic Messages, and
	// Bedrock's own Converse API, which has no other wire).
	Bedrock
	// Vertex is Google Vertex AI (Anthropic Messages, Gemini).
	Vertex
	// Azure is Azure OpenAI (OpenAI).
	Azure
	// NumPlatforms is the number of platforms, for arrays indexed by one.
	NumPlatforms
)

// Platform names, as routing snapshots (pkg/routesnap), the node's TOML,
// usage events and metrics write them. A first-party backend is named by
// its protocol's own platform.
const (
	NamePlatformAnthropic = "anthropic"
	NamePlatformOpenAI    = "openai"
	NamePlatformGoogle    = "google"
	NamePlatformBedrock   = "bedrock"
	NamePlatformVertex    = "vertex"
	NamePlatformAzure     = "azure"
)

// ParsePlatform maps a platform name to the Platform it stands for when a
// backend of protocol p names it: "" and p's own first-party name are
// FirstParty; ok is false for a name that is no platform of p.
func ParsePlatform(name string, p Protocol) (Platform, bool) {
	if p == BedrockConverse {
		// Bedrock's own API: Bedrock is its only wire, and a backend
		// names it (pkg/routesnap refuses one that does not).
		return Bedrock, name == NamePlatformBedrock
	}
	switch name {
	case "", FirstPartyName(p):
		return FirstParty, true
	case NamePlatformBedrock:
		return Bedrock, p == Anthropic
	case NamePlatformVertex:
		return Vertex, p == Anthropic || p == Gemini
	case NamePlatformAzure:
		return Azure, p == OpenAI
	}
	return FirstParty, false
}

// FirstPartyName is the platform name of protocol p's own wire:
// "openai", "anthropic", "google", or "bedrock" for Bedrock Converse,
// whose own wire is Bedrock's.
func FirstPartyName(p Protocol) string {
	switch p {
	case BedrockConverse:
		return NamePlatformBedrock
	case Anthropic:
		return NamePlatformAnthropic
	case Gemini:
		return NamePlatformGoogle
	}
	return NamePlatformOpenAI
}

// Name returns the platform's name for a backend of protocol p (the
// usage events' and metrics' platform).
func (pl Platform) Name(p Protocol) string {
	switch pl {
	case Bedrock:
		return NamePlatformBedrock
	case Vertex:
		return NamePlatformVertex
	case Azure:
		return NamePlatformAzure
	}
	return FirstPartyName(p)
}

// Envelope is how a cloud platform carries one endpoint of a protocol: the
// provider API's knowledge of that platform's URL, body and answer
// framing. The request path asks the target's envelope for each of them
// and stays platform-blind; an endpoint without an envelope for a
// platform is not served there. Every function field is safe for
// concurrent use and keeps none of its arguments.
type Envelope struct {
	// URL returns the provider URL of one attempt: base is the backend's
	// base URL (without trailing "/"; its query holds the platform's
	// query coordinates: Azure's api-version), model the target's provider model,
	// stream whether the request streams (Bedrock names that in the
	// path). An error means the model cannot be put in a URL.
	URL func(base *url.URL, model string, stream bool) (*url.URL, error)
	// Body makes the attempt's body into dst in place of
	// [Request.Split]: every edit the platform's envelope needs (listed
	// in docs/routing.md "Platforms") and no other; client is the
	// client's request headers, some of which the platform takes as body
	// members. nil: the protocol's own body edits ([Request.Split]), as
	// on its own wire.
	Body func(r *Request, body []byte, client http.Header, dst *Pieces) error
	// Header adjusts the provider request's headers that the endpoint's
	// Spec.Header built (credential included) to the platform: the
	// headers it takes in the body go, and a static credential goes the
	// platform's way.
	Header func(h http.Header, credential string)
	// Answer adapts the provider's answer to the protocol's own framing
	// before anything reads it: an error document into the protocol's
	// error shape, a platform stream into the protocol's SSE events. body
	// is the answer's body as the request path reads it (counted,
	// decoded); the returned reader replaces it, and resp's headers and
	// ContentLength are made to describe what it yields.
	Answer func(resp *http.Response, body io.Reader) io.Reader
	// SigningName is the service name of the platform's request
	// signatures (AWS SigV4: "bedrock"), "" when it signs none.
	SigningName string
}
