package usageevent

import "github.com/scootgate/scootgate/pkg/internal/plainjson"

// AppendProviderUsage appends raw as an event's provider_usage member
// carries it, compact and with < > & U+2028 U+2029 escaped (the bytes
// encoding/json writes for a json.RawMessage), when raw is a JSON object
// of the plain kind providers write their usage in: strings without \u
// escapes, nested at most 16 levels below the object, white space
// anywhere JSON allows it. It checks and copies in one pass, ~5
// instructions a byte where encoding/json takes ~50 to check alone; an
// encoder that writes events itself (the node's does, one per attempt)
// can use it for the member.
//
// Otherwise it returns dst unchanged and false, which says only that
// encoding/json must decide: raw may still be valid JSON (a \u escape,
// deeper nesting) or a value that [Event.Validate] refuses here (not an
// object).
func AppendProviderUsage(dst, raw []byte) ([]byte, bool) {
	return plainjson.AppendObject(dst, raw)
}
