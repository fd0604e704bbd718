package gemini

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/scootgate/scootgate/internal/provider"
)

// Status returns the google.rpc.Code name Google's APIs pair with an HTTP
// status (google/rpc/code.proto), for the "status" of an error document.
func Status(code int) string {
	switch code {
	case 400, 405, 413:
		return "INVALID_ARGUMENT"
	case 401:
		return "UNAUTHENTICATED"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 408, 504:
		return "DEADLINE_EXCEEDED"
	case 409:
		return "ABORTED"
	case 429:
		return "RESOURCE_EXHAUSTED"
	case 499:
		return "CANCELLED"
	case 501:
		return "UNIMPLEMENTED"
	case 503:
		return "UNAVAILABLE"
	}
	if code >= 500 {
		return "INTERNAL"
	}
	return "FAILED_PRECONDITION"
}

type errorBody struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Code    int      `json:"code"`
	Message string   `json:"message"`
	Status  string   `json:"status"`
	Details []detail `json:"details,omitempty"`
}

// detail is a google.rpc.ErrorInfo (Reason, Domain),
// google.rpc.RequestInfo (RequestID) or google.rpc.RetryInfo (RetryDelay),
// told apart by Type.
type detail struct {
	Type       string `json:"@type"`
	Reason     string `json:"reason,omitempty"`
	Domain     string `json:"domain,omitempty"`
	RequestID  string `json:"requestId,omitempty"`
	RetryDelay string `json:"retryDelay,omitempty"`
}

// LimitHeaders: Google's API sends no rate-limit headers; a limited key's
// state goes in OpenAI's names, which the providers behind
// OpenAI-compatible Gemini endpoints use too.
var LimitHeaders = &provider.RateLimitHeaders{
	Replace:  []string{"X-Ratelimit-"},
	Requests: [3]string{"X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests"},
	Tokens:   [3]string{"X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens"},
}

// RetryErrorBody is ErrorBody with a google.rpc.RetryInfo whose
// retryDelay (whole seconds, rounded up) is the retry advice: Google's
// SDKs and the Gemini CLI read a 429's delay from there.
func RetryErrorBody(status int, code, msg, requestID string, retryAfter time.Duration) []byte {
	e := errorObject{Code: status, Message: msg, Status: Status(status)}
	if code != "" {
		e.Details = append(e.Details, detail{Type: "type.googleapis.com/google.rpc.ErrorInfo", Reason: strings.ToUpper(code), Domain: "scootgate"})
	}
	if retryAfter > 0 {
		secs := int64((retryAfter + time.Second - 1) / time.Second)
		e.Details = append(e.Details, detail{Type: "type.googleapis.com/google.rpc.RetryInfo", RetryDelay: strconv.FormatInt(secs, 10) + "s"})
	}
	if requestID != "" {
		e.Details = append(e.Details, detail{Type: "type.googleapis.com/google.rpc.RequestInfo", RequestID: requestID})
	}
	b, err := json.Marshal(errorBody{Error: e})
	if err != nil { // unreachable: strings and an int
		return []byte(`{"error":{"code":500,"message":"internal error","status":"INTERNAL"}}`)
	}
	return b
}

// ErrorBody renders a gateway error in the Gemini shape:
// {"error":{"code":N,"message":…,"status":…,"details":[…]}}. code (the
// node's error code, such as model_not_found) becomes a google.rpc.ErrorInfo
// whose reason is its upper-case form, in the domain scootgate; the node's
// request id a google.rpc.RequestInfo.
func ErrorBody(status int, code, msg, requestID string) []byte {
	return RetryErrorBody(status, code, msg, requestID, 0)
}

// googleError is what the node reads of a Gemini error answer.
type googleError struct {
	Error struct {
		Message string `json:"message"`
		Status  string `json:"status"`
		Details []struct {
			Type       string `json:"@type"`
			Reason     string `json:"reason"`
			Violations []struct {
				QuotaID string `json:"quotaId"`
			} `json:"violations"`
			Metadata   map[string]string `json:"metadata"`
			RetryDelay string            `json:"retryDelay"`
		} `json:"details"`
	} `json:"error"`
}

// quotaWords mean, in a 429's message, that the account's money or credit
// is used up rather than a rate exceeded. Not "billing": Google's every
// quota message, per-minute ones included, asks to "check your plan and
// billing details".
var quotaWords = []string{"credits are depleted", "spending cap", "insufficient_quota", "余额不足"}

// quotaExhausted reports whether an answer says the quota is used up for
// long, as opposed to a rate limit (docs/failures.md "Quota exhaustion"):
//
//   - a 402, always;
//   - a 429 whose google.rpc.QuotaFailure names a daily quota (a quotaId
//     with "PerDay", such as GenerateRequestsPerDayPerProjectPerModel:
//     it resets once a day), or whose google.rpc.ErrorInfo names one in
//     metadata.quota_limit;
//   - a 429 whose message says that prepaid credits or the spending cap
//     are used up (quotaWords).
//
// A QuotaFailure alone does not: Google sends one with every per-minute
// limit too (GenerateRequestsPerMinutePerProjectPerModel), and those are
// rate limits that lift within the minute. Neither does a 429 without
// details ("Resource has been exhausted (e.g. check quota).").
func quotaExhausted(status int, body []byte) bool {
	switch status {
	case http.StatusPaymentRequired:
		return true
	case http.StatusTooManyRequests:
	default:
		return false
	}
	e, ok := readGoogleError(body)
	if !ok {
		return provider.Mentions(string(body), quotaWords)
	}
	for _, d := range e.Error.Details {
		for _, v := range d.Violations {
			if strings.Contains(v.QuotaID, "PerDay") {
				return true
			}
		}
		if strings.Contains(d.Metadata["quota_limit"], "PerDay") {
			return true
		}
	}
	return provider.Mentions(e.Error.Message, quotaWords)
}

// credentialRefused reports whether an answer says the backend's API key
// was refused: Google answers an invalid or expired key with a 400
// INVALID_ARGUMENT whose google.rpc.ErrorInfo reason is API_KEY_INVALID
// (or API_KEY_EXPIRED), not with a 401. Only the reason decides: a
// message can quote the client's request.
func credentialRefused(status int, body []byte) bool {
	if status != http.StatusBadRequest {
		return false
	}
	var e googleError
	if json.Unmarshal(body, &e) != nil {
		return false
	}
	for _, d := range e.Error.Details {
		if d.Reason == "API_KEY_INVALID" || d.Reason == "API_KEY_EXPIRED" {
			return true
		}
	}
	return false
}

// notRoutedCollections are the Gemini API's stored resources: they belong
// to the provider account that created them, which a node routing each
// request on its own to any backend of a pool cannot find again.
var notRoutedCollections = [...]string{"cachedContents", "files", "tunedModels", "batches", "operations", "corpora", "fileSearchStores", "generatedFiles"}

// notRoutedMethods are model methods that start a long-running operation
// stored with the account (batch mode, Veo's predictLongRunning).
var notRoutedMethods = [...]string{"batchGenerateContent", "asyncBatchEmbedContent", "predictLongRunning"}

// notRouted reports the Gemini paths the node knows and does not route:
// the stored resources under /v1beta/ (and the upload path of files), the
// ones of them under /v1/ whose names no other API uses, and the model
// methods that start stored operations.
func notRouted(path string) (code, msg string, ok bool) {
	if !storedPath(path) {
		return "", "", false
	}
	return "stateful_endpoint_not_supported", "ScootGate does not serve " + path +
		": stored Gemini resources (cached contents, files, tuned models, batches, operations) belong to the provider account that created them, " +
		"and this gateway routes each request on its own to any backend of a pool, so it cannot find them again. " +
		"Send the whole request with each generateContent call, or see the gateway's docs/api.md", true
}

func storedPath(path string) bool {
	if strings.HasPrefix(path, "/upload/v1beta/") || strings.HasPrefix(path, "/upload/v1/") {
		return true
	}
	for _, v := range versions {
		if strings.HasPrefix(path, v) {
			rest := path[len(v):]
			if i := strings.LastIndexByte(rest, ':'); i > 0 {
				for _, m := range notRoutedMethods {
					if rest[i+1:] == m {
						return true
					}
				}
			}
			return false
		}
	}
	var rest string
	switch {
	case strings.HasPrefix(path, "/v1beta/"):
		rest = path[len("/v1beta/"):]
	case strings.HasPrefix(path, "/v1/"):
		rest = path[len("/v1/"):]
	default:
		return false
	}
	first, _, _ := strings.Cut(rest, "/")
	first, _, _ = strings.Cut(first, ":")
	for _, c := range notRoutedCollections {
		if first != c {
			continue
		}
		// OpenAI has /v1/files, /v1/batches: under /v1 only the names no
		// other API uses are Gemini's.
		return strings.HasPrefix(path, "/v1beta/") || (c != "files" && c != "batches")
	}
	return false
}

// readGoogleError reads a Gemini error answer: one error document, or an
// array holding one (streamGenerateContent without alt=sse).
func readGoogleError(body []byte) (e googleError, ok bool) {
	if len(body) > 0 && body[0] == '[' {
		var arr []json.RawMessage
		if json.Unmarshal(body, &arr) == nil && len(arr) > 0 {
			body = arr[0]
		}
	}
	return e, json.Unmarshal(body, &e) == nil
}

// maxRetryDelay bounds the advice read from a body; the request path caps
// cooldowns further (docs/failures.md "Cooldowns").
const maxRetryDelay = 24 * time.Hour

// retryDelay reads the retry advice Google states in an error's body, not
// in Retry-After: a google.rpc.RetryInfo detail whose retryDelay is a
// protobuf Duration in its JSON form ("36s", "0.5s"). Zero when there is
// none or it is not a positive duration.
func retryDelay(body []byte) time.Duration {
	e, ok := readGoogleError(body)
	if !ok {
		return 0
	}
	for _, d := range e.Error.Details {
		if d.Type != "type.googleapis.com/google.rpc.RetryInfo" {
			continue
		}
		num, ok := strings.CutSuffix(d.RetryDelay, "s")
		if !ok {
			return 0
		}
		secs, err := strconv.ParseFloat(num, 64)
		if err != nil || !(secs > 0) {
			return 0
		}
		return time.Duration(min(secs, maxRetryDelay.Seconds()) * float64(time.Second))
	}
	return 0
}
