package provider

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/scootgate/scootgate/internal/jsonedit"
)

// Prefix is what begins a request's prompt as a provider's prompt cache
// reads it, for prefix affinity (docs/routing.md "Prefix affinity"): raw
// values of the body, aliasing it, nil when absent. Inspect fills it for
// the endpoints that hold a conversation.
type Prefix struct {
	Tools  []byte // the tool declarations
	System []byte // instructions outside the turns: Anthropic system, Responses instructions, Gemini systemInstruction
	Turns  []byte // the conversation: an array of turns, or a string (a Responses input of one user turn)
}

// Bounds of what PrefixDigest reads: a prompt cache keys on the first
// thousands of tokens, and the hash must stay cheap next to the request.
const (
	maxPrefixBytes = 64 << 10 // of each part
	maxLeadTurns   = 8        // instructions looked through for the first turn after them
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// PrefixDigest writes into dst a digest of the beginning of p's prompt:
// its tools, its system instructions and its turns from the first up to
// and including the first that is not an instruction (role "system" or
// "developer"), each part up to 64 KiB. Those bytes are the same in every
// turn of one conversation, and a provider's prompt cache keys on them,
// so the digest can stand in for a session key. It reports false when p
// has no turn (the request stays keyless). It is stable across nodes and
// processes (CRC-32C), and it does not allocate.
func PrefixDigest(p *Prefix, dst *[12]byte) bool {
	head, ok := leadTurns(p.Turns)
	if !ok {
		return false
	}
	binary.LittleEndian.PutUint32(dst[0:], sum(p.Tools))
	binary.LittleEndian.PutUint32(dst[4:], sum(p.System))
	binary.LittleEndian.PutUint32(dst[8:], sum(head))
	return true
}

func sum(b []byte) uint32 {
	return crc32.Checksum(b[:min(len(b), maxPrefixBytes)], castagnoli)
}

// leadTurns returns turns cut after its first element that is not an
// instruction (at most maxLeadTurns elements looked at), or a string turn
// whole.
func leadTurns(turns []byte) ([]byte, bool) {
	if len(turns) == 0 {
		return nil, false
	}
	if turns[0] == '"' {
		return turns, len(turns) > 2
	}
	it, err := jsonedit.Elements(turns)
	if err != nil {
		return nil, false
	}
	end := 0
	for range maxLeadTurns {
		v, at, more, err := it.Next()
		if err != nil || !more {
			break
		}
		end = at + len(v)
		if !instruction(v) {
			break
		}
	}
	return turns[:end], end > 0
}

// instruction reports whether a turn is an instruction: an object whose
// role is "system" or "developer". It reads members only up to the role
// (the body was validated whole by Inspect): an instruction's content can
// be the largest part of a prompt, and a hint for placement need not
// read it twice.
func instruction(turn []byte) bool {
	it, err := jsonedit.Members(turn)
	if err != nil {
		return false
	}
	for {
		m, more, err := it.Next()
		if err != nil || !more {
			return false
		}
		if m.KeyIs("role") {
			return jsonedit.EqualString(m.Value, "system") || jsonedit.EqualString(m.Value, "developer")
		}
	}
}
