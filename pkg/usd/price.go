package usd

// Rates are per-token prices of the four token classes a usage event
// counts (docs/usage-events.md "Token usage").
type Rates struct {
	Input      Amount // input tokens neither read from nor written to the prompt cache
	Output     Amount // output tokens, reasoning included
	CacheRead  Amount // input tokens read from the prompt cache
	CacheWrite Amount // input tokens written to the prompt cache
}

// Price is a target's price: its base rates and, when LongAbove > 0, the
// long-context rates that price every token of an attempt with more than
// LongAbove input tokens.
type Price struct {
	Base      Rates
	LongAbove int64 // 0 = no long-context tier
	Long      Rates
}

// Tokens are an attempt's token counts as a usage event normalizes them:
// Input is the whole input, cache reads and writes included; Output the
// whole output, reasoning included.
type Tokens struct {
	Input, Output, CacheRead, CacheWrite int64
}

// Cost is what tokens cost at p, exactly, in picodollars (saturating at
// [Max]): the input that was neither read from nor written to the cache
// at the input rate, cache reads and writes at theirs, the output at the
// output rate; all at the long-context rates when the input is above
// LongAbove.
func (p *Price) Cost(t Tokens) Amount {
	r := &p.Base
	if p.LongAbove > 0 && t.Input > p.LongAbove {
		r = &p.Long
	}
	read, write := max(t.CacheRead, 0), max(t.CacheWrite, 0)
	plain := max(t.Input-read-write, 0)
	c := Mul(plain, r.Input)
	c = Add(c, Mul(read, r.CacheRead))
	c = Add(c, Mul(write, r.CacheWrite))
	return Add(c, Mul(t.Output, r.Output))
}

// Most is the most an attempt of at most input input tokens and output
// output tokens can cost at p, however its input divides into cache
// reads, cache writes and the rest: every input token at the dearest of
// the three input rates. When input is above LongAbove, each rate is the
// dearer of the base and the long-context one (fewer tokens than input
// may be counted, on either side of the threshold).
func (p *Price) Most(input, output int64) Amount {
	r := p.Base
	if p.LongAbove > 0 && input > p.LongAbove {
		r = Rates{
			Input: max(r.Input, p.Long.Input), Output: max(r.Output, p.Long.Output),
			CacheRead: max(r.CacheRead, p.Long.CacheRead), CacheWrite: max(r.CacheWrite, p.Long.CacheWrite),
		}
	}
	return Add(Mul(input, max(r.Input, r.CacheRead, r.CacheWrite)), Mul(output, r.Output))
}

// PricesOutput reports whether p charges for output tokens at either
// tier.
func (p *Price) PricesOutput() bool {
	return p.Base.Output > 0 || p.LongAbove > 0 && p.Long.Output > 0
}
