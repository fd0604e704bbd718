package anthropic

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/scootgate/scootgate/internal/provider"
)

// Messages count_tokens on the cloud platforms (docs/routing.md
// "Platforms"): each platform has an operation of its own that counts a
// Messages request's input tokens, and the node carries the client's
// count_tokens request to it and its count back as Anthropic's
// {"input_tokens":N}.

// bedrockCountTokens is count_tokens on Bedrock: Bedrock Runtime's
// CountTokens operation, POST {base_url}/model/{modelId}/count-tokens,
// whose body carries the invoke body Messages would send, base64-encoded:
// {"input":{"invokeModel":{"body":"<base64>"}}}. Its answer,
// {"inputTokens":N}, becomes {"input_tokens":N}; its errors are
// Bedrock's, made Anthropic's as for Messages.
var bedrockCountTokens = &provider.Envelope{
	URL:         bedrockCountURL,
	Body:        bedrockCountBody,
	Header:      bedrockCountHeader,
	Answer:      bedrockCountAnswer,
	SigningName: BedrockSigningName,
}

// vertexCountTokens is count_tokens on Vertex AI: POST
// {resource}/publishers/anthropic/models/count-tokens:rawPredict, the one
// URL for every Claude model, with the body the protocol's own
// count_tokens sends (its model member names the target's Vertex model,
// "claude-sonnet-4@20250514"). Answers are Anthropic's; Google's own
// errors are made Anthropic's as for Messages.
var vertexCountTokens = &provider.Envelope{
	URL:    vertexCountURL,
	Header: vertexHeader,
	Answer: vertexAnswer,
}

// bedrockCountModel is the model id CountTokens takes for a target's
// model: Bedrock counts for a foundation model, not for a cross-region
// inference profile, so a geography prefix ("us.", "eu.", "apac.",
// "us-gov."… in front of "anthropic.") or an inference-profile ARN's
// path in front of it is dropped. Any other id (a foundation model id,
// an application inference profile's ARN) is sent as it is.
func bedrockCountModel(model string) string {
	if i := strings.Index(model, "anthropic."); i > 0 && (model[i-1] == '.' || model[i-1] == '/') {
		return model[i:]
	}
	return model
}

// bedrockCountURL is {base}/model/{modelId}/count-tokens, the model id
// escaped as AWS escapes it (BedrockModelPath).
func bedrockCountURL(base *url.URL, model string, _ bool) (*url.URL, error) {
	if model == "" {
		return nil, errors.New("anthropic: empty bedrock model id")
	}
	model = bedrockCountModel(model)
	u := *base
	u.Path = base.Path + "/model/" + model + "/count-tokens"
	u.RawPath = base.EscapedPath() + "/model/" + BedrockModelPath(model) + "/count-tokens"
	u.RawQuery, u.Fragment, u.RawFragment = "", "", ""
	return &u, nil
}

const (
	countInputOpen  = `{"input":{"invokeModel":{"body":"`
	countInputClose = `"}}}`
)

// bedrockCountBody is {"input":{"invokeModel":{"body":"<base64>"}}}, the
// base64 of the invoke body bedrockBody makes: the same edits as Messages
// on Bedrock (model out, anthropic_version and anthropic_beta in), every
// other byte the client's. It copies the body once, as base64 must.
func bedrockCountBody(r *provider.Request, body []byte, client http.Header, dst *provider.Pieces) error {
	var invoke provider.Pieces
	if err := bedrockBody(r, body, client, &invoke); err != nil {
		return err
	}
	n := base64.StdEncoding.EncodedLen(invoke.Len())
	out := bytes.NewBuffer(make([]byte, 0, len(countInputOpen)+n+len(countInputClose)))
	out.WriteString(countInputOpen)
	enc := base64.NewEncoder(base64.StdEncoding, out)
	for _, p := range invoke.Parts() {
		_, _ = enc.Write(p) // a bytes.Buffer does not fail
	}
	_ = enc.Close()
	out.WriteString(countInputClose)
	dst.Set(out.Bytes())
	return nil
}

// bedrockCountHeader is bedrockHeader, with the JSON content type
// CountTokens takes (the client's is the Messages body's, also JSON).
func bedrockCountHeader(h http.Header, credential string) {
	bedrockHeader(h, credential)
	h.Set("Content-Type", "application/json")
}

// maxCountAnswer bounds the CountTokens answer read to translate it.
const maxCountAnswer = 4 << 10

// bedrockCountAnswer makes CountTokens' {"inputTokens":N} Anthropic's
// {"input_tokens":N}, and an error answer Anthropic's error document. A
// 2xx answer that is not the count passes unchanged: the client's parser
// is the judge of it, as for any provider answer.
func bedrockCountAnswer(resp *http.Response, body io.Reader) io.Reader {
	if resp.StatusCode/100 != 2 {
		return bedrockAnswer(resp, body)
	}
	data, err := io.ReadAll(io.LimitReader(body, maxCountAnswer))
	if err != nil {
		return errReader{err}
	}
	var out struct {
		InputTokens *int64 `json:"inputTokens"`
	}
	if json.Unmarshal(data, &out) != nil || out.InputTokens == nil || *out.InputTokens < 0 {
		return io.MultiReader(bytes.NewReader(data), body)
	}
	doc := []byte(`{"input_tokens":` + strconv.FormatInt(*out.InputTokens, 10) + `}`)
	resp.Header.Set("Content-Type", "application/json")
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
	return bytes.NewReader(doc)
}

// vertexCountURL is the resource's count-tokens URL; the model is the
// body's.
func vertexCountURL(base *url.URL, model string, _ bool) (*url.URL, error) {
	if model == "" {
		return nil, errors.New("anthropic: empty vertex model id")
	}
	return provider.VertexModelURL(base, "anthropic", "count-tokens", "rawPredict"), nil
}
