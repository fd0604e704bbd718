package metrics

import (
	"slices"
	"strconv"
	"strings"

	"github.com/scootgate/scootgate/internal/egress"
	"github.com/scootgate/scootgate/internal/provider"
	"github.com/scootgate/scootgate/internal/upstream"
	"github.com/scootgate/scootgate/pkg/usageevent"
)

// Every label value is either one of a closed set of words or a config id
// (backend id, proxy name) checked against the id shape the config and the
// route snapshot enforce. A value outside its set is exported as one of
// these words, never as the caller's string, so no key, digest, URL, body
// or error text can reach a label.
const (
	labelUnknown = "unknown" // a closed-set value the node does not know
	labelInvalid = "invalid" // a config id that does not have the id shape
)

// EndpointModels is the endpoint label of GET /v1/models and
// /v1/models/{id} ([Metrics.ObserveModels]); the other endpoints are
// labelled with provider.Endpoint's names.
const EndpointModels = "models"

// SendStateNone is the send_state of a request that never reached an
// attempt (provider.NoAttempt): rejected by the node itself (401, 403,
// 404, 413, 400, no capacity before any pick) or a /v1/models listing.
// The other send states are labelled with the usage event's names
// (usageevent.Send*, docs/failures.md "Send state").
const SendStateNone = "none"

// endpoint indexes the pre-resolved request-duration histograms: the
// provider.Endpoint values, then models, then unknown.
type endpoint uint8

const (
	epModels     = endpoint(provider.NumEndpoints)
	epUnknown    = epModels + 1
	numEndpoints = int(epUnknown) + 1
)

var endpointNames = func() (names [numEndpoints]string) {
	for e := range provider.NumEndpoints {
		names[e] = e.String()
	}
	names[epModels], names[epUnknown] = EndpointModels, labelUnknown
	return names
}()

func endpointOf(e provider.Endpoint) endpoint {
	if e < provider.NumEndpoints {
		return endpoint(e)
	}
	return epUnknown
}

// sendStateNames are the send_state labels, indexed by provider.SendState:
// the usage event's names, and SendStateNone for provider.NoAttempt.
var sendStateNames = func() (names [provider.NumSendStates]string) {
	for s := range provider.NumSendStates {
		names[s] = s.String()
	}
	names[provider.NoAttempt] = SendStateNone
	return names
}()

func sendStateLabel(s provider.SendState) string {
	if s < provider.NumSendStates {
		return sendStateNames[s]
	}
	return labelUnknown
}

// statusCodes holds every code 100-599 as three digits, back to back, so
// codeLabel slices a label out of it without allocating (strconv.Itoa
// allocates above 99).
type statusCodes string

func newStatusCodes() statusCodes {
	var b strings.Builder
	b.Grow(3 * 500)
	for c := 100; c < 600; c++ {
		b.WriteString(strconv.Itoa(c))
	}
	return statusCodes(b.String())
}

func (sc statusCodes) label(code int) string {
	if code < 100 || code > 599 {
		return labelUnknown
	}
	i := 3 * (code - 100)
	return string(sc[i : i+3])
}

// outcomeLabel returns o's name: upstream.Outcome's String is itself a
// closed set, "unknown" for a value upstream does not define.
func outcomeLabel(o upstream.Outcome) string { return o.String() }

// stageLabels is the closed set of egress.Stage names. egress.Stage is
// not contiguous (two families), so the set is listed; a Stage outside
// it is "unknown", never its String ("stage(9)").
func stageLabels() map[egress.Stage]string {
	m := make(map[egress.Stage]string)
	for _, s := range []egress.Stage{
		egress.StageProxyDial, egress.StageProxyAuth, egress.StageProxyTLS, egress.StageProxyPolicy,
		egress.StageTarget, egress.StageProviderTLS,
	} {
		m[s] = s.String()
	}
	return m
}

// platformLabel returns a backend's platform (docs/routing.md
// "Platforms") as a label value: one of the platforms the node knows,
// "unknown" otherwise.
func platformLabel(s string) string {
	switch s {
	case usageevent.PlatformOpenAI, usageevent.PlatformAnthropic, usageevent.PlatformGoogle,
		usageevent.PlatformBedrock, usageevent.PlatformVertex, usageevent.PlatformAzure:
		return s
	}
	return labelUnknown
}

func stageLabel(set map[egress.Stage]string, s egress.Stage) string {
	if v, ok := set[s]; ok {
		return v
	}
	return labelUnknown
}

func closedLabel(set map[string]string, s string) string {
	if v, ok := set[s]; ok {
		return v
	}
	return labelUnknown
}

// idLabel returns s when it has the shape of a config id (1-64 of
// [A-Za-z0-9._-], as internal/config and pkg/routesnap require of backend
// ids and proxy names), else "invalid". A URL, a bearer header or a JSON
// body cannot have that shape.
func idLabel(s string) string {
	if s == "" || len(s) > 64 {
		return labelInvalid
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return labelInvalid
		}
	}
	return s
}

// sortedValues returns the values of a closed set in order.
func sortedValues[K comparable](set map[K]string) []string {
	out := make([]string, 0, len(set))
	for _, v := range set {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// versionLabel returns s when it looks like a version, a VCS revision or
// a Go version (1-128 of [A-Za-z0-9._+-]), else "invalid".
func versionLabel(s string) string {
	if s == "" || len(s) > 128 {
		return labelInvalid
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == '+') {
			return labelInvalid
		}
	}
	return s
}

func boolLabel(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
