package anthropic

import (
	"encoding/json"
	"net/url"
	"strconv"
	"time"

	"github.com/scootgate/scootgate/internal/provider"
)

// Model is one entry of the Anthropic model list, and the answer of
// GET /v1/models/{id}.
type Model struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
	CreatedAt   string `json:"created_at"`
}

// ModelList is the answer of GET /v1/models in the Anthropic shape.
type ModelList struct {
	Data    []Model `json:"data"`
	HasMore bool    `json:"has_more"`
	FirstID *string `json:"first_id"`
	LastID  *string `json:"last_id"`
}

// NewModel returns the model entry the node shows for a public model.
func NewModel(name, createdAt string) Model {
	return Model{Type: "model", ID: name, DisplayName: name, CreatedAt: createdAt}
}

// listModels is GET /v1/models in the Anthropic shape, with its paging
// parameters limit (1..1000, default 20), after_id and before_id.
func listModels(names []string, q url.Values, created time.Time) ([]byte, *provider.BodyError) {
	page, more, berr := paginate(names, q)
	if berr != nil {
		return nil, berr
	}
	at := created.UTC().Format(time.RFC3339)
	list := ModelList{Data: make([]Model, 0, len(page)), HasMore: more}
	for _, n := range page {
		list.Data = append(list.Data, NewModel(n, at))
	}
	if len(page) > 0 {
		list.FirstID, list.LastID = &page[0], &page[len(page)-1]
	}
	return marshal(list), nil
}

// getModel is GET /v1/models/{name} in the Anthropic shape.
func getModel(name string, created time.Time) []byte {
	return marshal(NewModel(name, created.UTC().Format(time.RFC3339)))
}

// paginate applies limit, after_id and before_id to sorted names.
func paginate(names []string, q url.Values) ([]string, bool, *provider.BodyError) {
	limit := 20
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			return nil, false, &provider.BodyError{Code: "invalid_limit", Msg: "limit must be an integer from 1 to 1000"}
		}
		limit = n
	}
	lo, hi := 0, len(names)
	if after := q.Get("after_id"); after != "" {
		for lo < hi && names[lo] <= after {
			lo++
		}
	}
	if before := q.Get("before_id"); before != "" {
		for hi > lo && names[hi-1] >= before {
			hi--
		}
		if hi-lo > limit {
			return names[hi-limit : hi], true, nil
		}
		return names[lo:hi], false, nil
	}
	if hi-lo > limit {
		return names[lo : lo+limit], true, nil
	}
	return names[lo:hi], false, nil
}

// marshal encodes a model answer, which holds only strings and booleans.
func marshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("anthropic: encoding a model answer: " + err.Error()) // unreachable: strings and booleans only
	}
	return b
}
