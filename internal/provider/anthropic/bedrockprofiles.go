package anthropic

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/scootgate/scootgate/internal/provider"
)

// BedrockInferenceProfiles is Bedrock's ListInferenceProfiles,
// GET /inference-profiles (docs/api.md "Cloud client paths"): Claude Code
// in its Bedrock mode asks it first (?type=SYSTEM_DEFINED), keeps the
// profile ids that hold "anthropic", and picks its default models among
// them. The node lists each public Messages model the key may use as a
// system-defined profile whose id is the model's name.
var BedrockInferenceProfiles = &provider.ModelsDoor{
	Platform:   provider.Bedrock,
	Path:       "/inference-profiles",
	List:       listInferenceProfiles,
	Writer:     func(w http.ResponseWriter) provider.DoorWriter { return newBedrockWriter(w) },
	MissingKey: bedrockMissingKey,
}

// inferenceProfile is one of ListInferenceProfiles' summaries. models
// would name the foundation models behind a profile; the node does not
// say which targets serve a public model, so it is empty.
type inferenceProfile struct {
	Name      string     `json:"inferenceProfileName"`
	ID        string     `json:"inferenceProfileId"`
	ARN       string     `json:"inferenceProfileArn"`
	Models    []struct{} `json:"models"`
	Status    string     `json:"status"`
	Type      string     `json:"type"`
	CreatedAt string     `json:"createdAt"`
	UpdatedAt string     `json:"updatedAt"`
}

type inferenceProfiles struct {
	Summaries []inferenceProfile `json:"inferenceProfileSummaries"`
	NextToken *string            `json:"nextToken,omitempty"`
}

// listInferenceProfiles answers ListInferenceProfiles for the sorted
// names. Its query parameters are Bedrock's: type (SYSTEM_DEFINED, the
// kind the node's models are listed as, or APPLICATION, of which there
// are none), maxResults (1 to 1000; default all) and nextToken (the last
// name of the page before, as the answer gave it). Any other parameter,
// or one given twice, is refused.
func listInferenceProfiles(names []string, q url.Values, created time.Time) ([]byte, *provider.BodyError) {
	for k, vs := range q {
		switch {
		case k != "type" && k != "maxResults" && k != "nextToken":
			return nil, &provider.BodyError{Code: "invalid_request", Msg: "unknown query parameter " + strconv.Quote(k) + ": want type, maxResults or nextToken"}
		case len(vs) != 1:
			return nil, &provider.BodyError{Code: "invalid_request", Msg: "query parameter " + k + " is given more than once"}
		}
	}
	switch q.Get("type") {
	case "", "SYSTEM_DEFINED":
	case "APPLICATION":
		names = nil
	default:
		return nil, &provider.BodyError{Code: "invalid_request", Msg: "type must be SYSTEM_DEFINED or APPLICATION"}
	}
	limit := len(names)
	if s, ok := q["maxResults"]; ok {
		n, err := strconv.Atoi(s[0])
		if err != nil || n < 1 || n > 1000 {
			return nil, &provider.BodyError{Code: "invalid_request", Msg: "maxResults must be an integer from 1 to 1000"}
		}
		limit = n
	}
	lo := 0
	if s, ok := q["nextToken"]; ok {
		for lo < len(names) && names[lo] <= s[0] {
			lo++
		}
	}
	page := names[lo:]
	var out inferenceProfiles
	if len(page) > limit {
		page = page[:limit]
		out.NextToken = &page[limit-1]
	}
	at := created.UTC().Format(time.RFC3339)
	out.Summaries = make([]inferenceProfile, 0, len(page))
	for _, n := range page {
		out.Summaries = append(out.Summaries, inferenceProfile{
			Name: n, ID: n, ARN: "arn:aws:bedrock:::inference-profile/" + n,
			Models: []struct{}{}, Status: "ACTIVE", Type: "SYSTEM_DEFINED", CreatedAt: at, UpdatedAt: at,
		})
	}
	return marshal(out), nil
}
