package fakeprovider_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestRerankV2Shape: /v2/rerank answers as Cohere does, usage in
// meta.billed_units.
func TestRerankV2Shape(t *testing.T) {
	_, base := start(t, nil)
	resp, err := post(t, &http.Client{}, http.MethodPost, strings.TrimSuffix(base, "/v1")+"/v2/rerank", openAIHeader(),
		`{"model":"rerank-test","query":"best fruit","documents":["apple pie","cherry"]}`)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	want := `{"id":"rerank-fake000001","results":[{"index":0,"relevance_score":0.5},{"index":1,"relevance_score":0.333333}],"meta":{"billed_units":{"search_units":1,"input_tokens":5}}}`
	if resp.StatusCode != 200 || string(body) != want {
		t.Errorf("%d %s\nwant %s", resp.StatusCode, body, want)
	}
}
