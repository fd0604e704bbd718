package openai

import (
	"encoding/json"
	"net/url"
	"time"

	"github.com/scootgate/scootgate/internal/provider"
)

// Model is one entry of the OpenAI model list, and the answer of
// GET /v1/models/{id}.
type Model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// ModelList is the answer of GET /v1/models.
type ModelList struct {
	Object string  `json:"object"`
	Data   []Model `json:"data"`
}

// NewModel returns the model entry the node shows for a public model.
func NewModel(name string, created int64) Model {
	return Model{ID: name, Object: "model", Created: created, OwnedBy: "scootgate"}
}

// listModels is GET /v1/models in the OpenAI shape: every model, no
// paging (the API has none).
func listModels(names []string, _ url.Values, created time.Time) ([]byte, *provider.BodyError) {
	list := ModelList{Object: "list", Data: make([]Model, 0, len(names))}
	for _, n := range names {
		list.Data = append(list.Data, NewModel(n, created.Unix()))
	}
	return marshal(list), nil
}

// getModel is GET /v1/models/{name} in the OpenAI shape.
func getModel(name string, created time.Time) []byte {
	return marshal(NewModel(name, created.Unix()))
}

// marshal encodes a model answer, which holds only strings and numbers.
func marshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("openai: encoding a model answer: " + err.Error()) // unreachable: strings and numbers only
	}
	return b
}
