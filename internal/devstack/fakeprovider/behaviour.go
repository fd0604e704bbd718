package fakeprovider

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// DefaultChunks is the number of pieces a reply is split into when neither a
// directive nor the Script says otherwise.
const DefaultChunks = 3

// Behaviour scripts one answer. The zero value is a normal, successful answer.
//
// The knobs apply in this order: Delay; then Hang; then Reset; then Status
// (or Quota); otherwise a successful answer shaped by Chunks, the usage
// extras and, for streams, EventDelay, Cut and ErrorEvent.
type Behaviour struct {
	// Delay is waited before the status line (the request context ends it early).
	Delay time.Duration
	// Hang holds the request until its context ends, without answering.
	Hang bool
	// Reset reads the whole request body, then closes the TCP connection with
	// an RST and no response at all.
	Reset bool

	// Status, when non-zero (400-599), answers with an error of that status in
	// the protocol's shape.
	Status int
	// Quota answers 429 with the OpenAI insufficient_quota code (Anthropic:
	// rate_limit_error). It wins over Status.
	Quota bool
	// RetryAfter, when positive, adds a Retry-After header (whole seconds,
	// rounded up) to error answers.
	RetryAfter time.Duration
	// ErrorMessage, with Status, replaces the error document's message (a
	// provider's own wording, such as Anthropic's 400 "Your credit balance
	// is too low").
	ErrorMessage string
	// Gzip sends the answer (stream or not) gzip-compressed with
	// Content-Encoding: gzip although the request did not ask for it, as
	// some providers and their CDNs do; a stream is flushed through the
	// compressor after each event.
	Gzip bool
	// ContentEncoding labels a non-stream answer with this Content-Encoding
	// without encoding it (an encoding a gateway may not decode, such as
	// "br"). Gzip wins over it.
	ContentEncoding string

	// Chunks is the number of pieces the reply is split into (0 means
	// DefaultChunks; fewer when the reply has fewer characters).
	Chunks int
	// CacheReadTokens, CacheWriteTokens and ReasoningTokens feed the usage
	// numbers (see the package doc for the formulas).
	CacheReadTokens  int
	CacheWriteTokens int
	ReasoningTokens  int

	// EventDelay is waited between stream events.
	EventDelay time.Duration
	// FirstEventDelay is waited after the status line and headers of a
	// stream, before its first event (a reasoning model thinking).
	FirstEventDelay time.Duration
	// Cut drops the connection after CutAfter events without a terminator.
	// CutAfter is clamped so the terminator ([DONE] / message_stop) is never
	// sent. On a non-stream request Cut sends the headers and the first half
	// of the body, then drops the connection.
	Cut      bool
	CutAfter int
	// ErrorEvent sends an in-band error after ErrorAfter events (clamped like
	// CutAfter) and ends the response without a terminator. OpenAI:
	// `data: {"error":…}`; Anthropic: `event: error` (overloaded_error).
	// Ignored on non-stream requests.
	ErrorEvent bool
	ErrorAfter int

	// Bedrock streams only: BedrockException names the exception message
	// ErrorEvent sends ("throttlingException"; default
	// modelStreamErrorException), and BadCRC sends, after ErrorAfter
	// events, a chunk whose message checksum is wrong, and ends.
	BedrockException string
	BadCRC           bool

	// RateLimit replaces what the rate-limit headers of the answer (any
	// answer, error or not) say, in the protocol's forms; Gemini sends
	// none.
	RateLimit RateLimit
}

// RateLimit is what an answer's rate-limit headers say. The zero value
// is the provider's defaults: plenty left, resets in the near future.
type RateLimit struct {
	// Requests and Tokens, when set, are the remaining counts (the limits
	// stay at least the defaults).
	Requests, Tokens *int
	// Reset, when positive, is when both budgets are whole again: an
	// OpenAI duration ("30s") or an Anthropic RFC 3339 time this far
	// ahead (rounded up to the second).
	Reset time.Duration
}

// ErrDirective is wrapped by every directive parsing error.
var ErrDirective = errors.New("fakeprovider: bad directive")

// directiveRE matches one [[name]] or [[name=value]] directive.
var directiveRE = regexp.MustCompile(`\[\[([a-z_]+)(?:=([^\]]*))?\]\]`)

// ParseDirectives reads the [[…]] directives in text into a Behaviour and
// returns text with them removed (and surrounding space trimmed). Errors wrap
// ErrDirective.
func ParseDirectives(text string) (Behaviour, string, error) {
	var b Behaviour
	for _, m := range directiveRE.FindAllStringSubmatch(text, -1) {
		if err := b.apply(m[1], m[2]); err != nil {
			return Behaviour{}, "", fmt.Errorf("%w: %s: %w", ErrDirective, m[0], err)
		}
	}
	rest := directiveRE.ReplaceAllString(text, "")
	return b, strings.Join(strings.Fields(rest), " "), nil
}

// apply sets the field named by one directive.
func (b *Behaviour) apply(name, value string) error {
	switch name {
	case "hang":
		b.Hang = true
		return noValue(value)
	case "quota":
		b.Quota = true
		return noValue(value)
	case "reset":
		if value != "after_body" {
			return errors.New("want reset=after_body")
		}
		b.Reset = true
		return nil
	case "cut":
		n, err := countAfter(value, "after_events:")
		b.Cut, b.CutAfter = true, n
		return err
	case "error_event":
		n, err := countAfter(value, "after:")
		b.ErrorEvent, b.ErrorAfter = true, n
		return err
	case "status":
		n, err := number(value)
		if err == nil && (n < 400 || n > 599) {
			err = errors.New("want a status in 400-599")
		}
		b.Status = n
		return err
	case "ratelimit_reset":
		d, err := time.ParseDuration(value)
		if err == nil && d <= 0 {
			err = errors.New("want a positive duration")
		}
		b.RateLimit.Reset = d
		return err
	case "chunks":
		n, err := number(value)
		if err == nil && n < 1 {
			err = errors.New("want at least 1")
		}
		b.Chunks = n
		return err
	}
	n, err := number(value)
	switch name {
	case "retry_after":
		b.RetryAfter = time.Duration(n) * time.Second
	case "delay_ms":
		b.Delay = time.Duration(n) * time.Millisecond
	case "event_delay_ms":
		b.EventDelay = time.Duration(n) * time.Millisecond
	case "first_event_delay_ms":
		b.FirstEventDelay = time.Duration(n) * time.Millisecond
	case "cache_read":
		b.CacheReadTokens = n
	case "cache_write":
		b.CacheWriteTokens = n
	case "reasoning":
		b.ReasoningTokens = n
	case "ratelimit_remaining_requests":
		b.RateLimit.Requests = &n
	case "ratelimit_remaining_tokens":
		b.RateLimit.Tokens = &n
	default:
		return errors.New("unknown directive")
	}
	return err
}

func noValue(value string) error {
	if value != "" {
		return errors.New("takes no value")
	}
	return nil
}

// countAfter parses "<prefix>K".
func countAfter(value, prefix string) (int, error) {
	k, ok := strings.CutPrefix(value, prefix)
	if !ok {
		return 0, fmt.Errorf("want %sK", prefix)
	}
	return number(k)
}

// number parses a non-negative decimal integer.
func number(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, errors.New("want a non-negative integer")
	}
	return n, nil
}
