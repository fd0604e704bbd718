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
