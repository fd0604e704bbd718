package routesnap

import (
	"errors"
	"math"

	"github.com/scootgate/scootgate/pkg/usd"
)

// Price is what a target's provider charges for its tokens
// (docs/routing.md "Prices"), in USD per million tokens, each an exact
// decimal string with at most 6 digits after the point ("3", "0.0375"),
// up to [usd.MaxPerMillion]. The token classes are those of a usage
// event's normalized usage (docs/usage-events.md "Token usage"): input
// not read from or written to the prompt cache, cache reads, cache
// writes, and output. Reasoning tokens are part of the output in all
// three protocols and are billed at the output price, as the providers
// bill them.
type Price struct {
	Input  string `json:"input"`  // required
	Output string `json:"output"` // required
	// CacheRead and CacheWrite are optional; absent ("") means the input
	// price.
	CacheRead  string `json:"cache_read,omitempty"`
	CacheWrite string `json:"cache_write,omitempty"`
	// LongContext, if set, prices an attempt whose input tokens are more
	// than its AboveInputTokens with its own prices, all of its tokens,
	// as Anthropic and Google price long prompts.
	LongContext *PriceTier `json:"long_context,omitempty"`
}

// PriceTier is the long-context tier of a [Price]: the same members, and
// the input-token count above which it applies.
type PriceTier struct {
	AboveInputTokens int64  `json:"above_input_tokens"` // ≥ 1
	Input            string `json:"input"`
	Output           string `json:"output"`
	CacheRead        string `json:"cache_read,omitempty"`
	CacheWrite       string `json:"cache_write,omitempty"`
}

// Parse returns the price in picodollars a token. The price must be
// valid (the document passed Validate); a malformed member reads as 0.
func (p *Price) Parse() usd.Price {
	r := usd.Price{Base: rates(p.Input, p.Output, p.CacheRead, p.CacheWrite)}
	if lc := p.LongContext; lc != nil {
		r.LongAbove = lc.AboveInputTokens
		r.Long = rates(lc.Input, lc.Output, lc.CacheRead, lc.CacheWrite)
	}
	return r
}

func rates(in, out, cr, cw string) usd.Rates {
	r := usd.Rates{}
	r.Input, _ = usd.ParsePerMillion(in)
	r.Output, _ = usd.ParsePerMillion(out)
	r.CacheRead, r.CacheWrite = r.Input, r.Input
	if cr != "" {
		r.CacheRead, _ = usd.ParsePerMillion(cr)
	}
	if cw != "" {
		r.CacheWrite, _ = usd.ParsePerMillion(cw)
	}
	return r
}

// price checks a target's price at path.
func (v *validator) price(path string, p *Price) {
	if p == nil {
		return
	}
	v.since(2, path)
	v.rates(path, p.Input, p.Output, p.CacheRead, p.CacheWrite)
	if lc := p.LongContext; lc != nil {
		lpath := path + ".long_context"
		if lc.AboveInputTokens < 1 {
			v.add(lpath+".above_input_tokens", "must be 1..%d, got %d", int64(math.MaxInt64), lc.AboveInputTokens)
		}
		v.rates(lpath, lc.Input, lc.Output, lc.CacheRead, lc.CacheWrite)
	}
}

func (v *validator) rates(path, in, out, cr, cw string) {
	for _, m := range []struct {
		name, s  string
		required bool
	}{{"input", in, true}, {"output", out, true}, {"cache_read", cr, false}, {"cache_write", cw, false}} {
		switch {
		case m.s == "" && m.required:
			v.add(path+"."+m.name, "required: a price in USD per million tokens, a decimal string such as \"3.75\"")
		case m.s == "":
		default:
			if _, err := usd.ParsePerMillion(m.s); err != nil {
				v.add(path+"."+m.name, "%q %s: want a price in USD per million tokens, a decimal string such as \"3.75\" with at most 6 digits after the point, up to %d", clip(m.s), priceMsg(err), usd.MaxPerMillion)
			}
		}
	}
}

// priceMsg is the parser's complaint without its quoted input, which
// validation quotes (clipped) itself.
func priceMsg(err error) string {
	switch {
	case errors.Is(err, usd.ErrPrecision):
		return "has too many digits after the point"
	case errors.Is(err, usd.ErrRange):
		return "is too large"
	}
	return "is not a non-negative decimal"
}
