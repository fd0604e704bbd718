package usage

import (
	"crypto/rand"
	"encoding/hex"
	"time"
)

// NewEventID returns a new event id: a UUID version 7 (RFC 9562 §5.7) in
// canonical lowercase form, whose first 48 bits are now in Unix
// milliseconds and whose other 74 variable bits come from crypto/rand.
//
// The id is made once per attempt and stored with the event, so a replay
// carries the same id (docs/usage-events.md). Random bits make ids unique across a fleet
// without coordination (two ids of one millisecond collide with probability
// 2^-74); the time prefix keeps ids of nearby events close in a consumer's
// index and tells roughly when an event was recorded. Ids made in the same
// millisecond are not ordered among themselves.
func NewEventID(now time.Time) string {
	var b [16]byte
	_, _ = rand.Read(b[6:]) // crypto/rand.Read never fails (Go 1.24+)
	ms := uint64(max(now.UnixMilli(), 0))
	for i := range 6 {
		b[i] = byte(ms >> (40 - 8*i))
	}
	b[6] = 0x70 | b[6]&0x0f // version 7
	b[8] = 0x80 | b[8]&0x3f // variant 10 (RFC 9562)

	var out [36]byte
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:36], b[10:16])
	return string(out[:])
}
