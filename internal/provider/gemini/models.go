package gemini

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"sort"
	"strconv"
	"time"

	"github.com/scootgate/scootgate/internal/provider"
)

// Model is one entry of the Gemini model list, and the answer of
// GET /v1beta/models/{model}.
type Model struct {
	Name                       string   `json:"name"`
	BaseModelID                string   `json:"baseModelId"`
	DisplayName                string   `json:"displayName"`
	SupportedGenerationMethods []string `json:"supportedGenerationMethods"`
}

// ModelList is the answer of GET /v1beta/models.
type ModelList struct {
	Models        []Model `json:"models"`
	NextPageToken string  `json:"nextPageToken,omitempty"`
}

// methods are the generation methods every public model shows: what a
// model of the node serves depends on its backends' endpoints, which the
// list does not know; generation and token counting are the defaults.
var methods = []string{"generateContent", "streamGenerateContent", "countTokens"}

// NewModel returns the model entry the node shows for a public model.
func NewModel(name string) Model {
	return Model{Name: "models/" + name, BaseModelID: name, DisplayName: name, SupportedGenerationMethods: methods}
}

// Paging of the model list, as Google's: pageSize 50 when absent (or 0),
// and at most 1000 whatever the client asks.
const (
	defaultPageSize = 50
	maxPageSize     = 1000
)

// listModels is GET /v1beta/models in the Gemini shape, with its paging
// parameters pageSize and pageToken. The page token is opaque to clients:
// the base64url of the last name of the page before.
func listModels(names []string, q url.Values, _ time.Time) ([]byte, *provider.BodyError) {
	size := defaultPageSize
	if s := q.Get("pageSize"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return nil, &provider.BodyError{Code: "invalid_page_size", Msg: "pageSize must be a non-negative integer"}
		}
		if n > 0 {
			size = min(n, maxPageSize)
		}
	}
	lo := 0
	if tok := q.Get("pageToken"); tok != "" {
		after, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil || len(after) == 0 {
			return nil, &provider.BodyError{Code: "invalid_page_token", Msg: "pageToken is not a token this gateway gave out"}
		}
		lo = sort.SearchStrings(names, string(after))
		if lo < len(names) && names[lo] == string(after) {
			lo++
		}
	}
	page := names[lo:]
	list := ModelList{Models: make([]Model, 0, min(len(page), size))}
	if len(page) > size {
		page = page[:size]
		list.NextPageToken = base64.RawURLEncoding.EncodeToString([]byte(page[len(page)-1]))
	}
	for _, n := range page {
		list.Models = append(list.Models, NewModel(n))
	}
	return marshal(list), nil
}

// getModel is GET /v1beta/models/{model} in the Gemini shape.
func getModel(name string, _ time.Time) []byte { return marshal(NewModel(name)) }

// marshal encodes a model answer, which holds only strings.
func marshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("gemini: encoding a model answer: " + err.Error()) // unreachable: strings only
	}
	return b
}
