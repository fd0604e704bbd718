package usage

import (
	"bytes"
	"fmt"

	"github.com/scootgate/scootgate/internal/jsonedit"
)

var (
	jsonTrue  = []byte("true")
	jsonFalse = []byte("false")
	jsonNull  = []byte("null")

	// includeUsageOptions is the stream_options member added to a request
	// that has none.
	includeUsageOptions = []byte(`{"include_usage":true}`)
)

// InjectIncludeUsage makes an OpenAI Chat Completions request that streams
// ask the provider for usage (docs/usage-events.md): it sets
// stream_options.include_usage to true and reports whether it had to.
// injected is true exactly when the client did not ask for usage itself,
// so the caller must then hide the usage-only chunk from the client
// ([NewOpenAIStream] with hideUsageChunk).
//
// The edit is byte-faithful (docs/api.md): only the stream_options value
// changes, or a stream_options member is added after the last member.
//
//   - no top-level "stream": true (exactly that member and value): body is
//     returned unchanged, injected false;
//   - stream_options absent: `"stream_options":{"include_usage":true}` is
//     added;
//   - stream_options null: its value becomes {"include_usage":true};
//   - stream_options an object without include_usage: `"include_usage":true`
//     is added after its last member, the rest of it is kept byte for byte;
//   - include_usage false or null: it becomes true;
//   - include_usage true: unchanged, injected false (the client asked);
//   - stream_options or include_usage of another type: unchanged, injected
//     false. The provider rejects such a request; the gateway does not
//     correct it.
//
// When injected is false, out is body itself. Duplicate stream_options
// members are all replaced by the edited last one, which is the one
// encoding/json (and so the provider's parser, most likely) would read.
// A malformed body returns an error from package jsonedit, wrapped.
func InjectIncludeUsage(body []byte) (out []byte, injected bool, err error) {
	stream, ok, err := jsonedit.Lookup(body, "stream")
	if err != nil {
		return nil, false, fmt.Errorf("usage: inject include_usage: %w", err)
	}
	if !ok || !bytes.Equal(stream, jsonTrue) {
		return body, false, nil
	}

	opts, ok, err := jsonedit.Lookup(body, "stream_options")
	if err != nil {
		return nil, false, fmt.Errorf("usage: inject include_usage: %w", err)
	}
	if !ok {
		out, err = jsonedit.Insert(body, "stream_options", includeUsageOptions)
		if err != nil {
			return nil, false, fmt.Errorf("usage: inject include_usage: %w", err)
		}
		return out, true, nil
	}

	var newOpts []byte
	switch {
	case bytes.Equal(opts, jsonNull):
		newOpts = includeUsageOptions
	case opts[0] == '{':
		inc, ok, err := jsonedit.Lookup(opts, "include_usage")
		switch {
		case err != nil: // cannot happen: body was validated as a whole
			return nil, false, fmt.Errorf("usage: inject include_usage: stream_options: %w", err)
		case !ok:
			newOpts, err = jsonedit.Insert(opts, "include_usage", jsonTrue)
		case bytes.Equal(inc, jsonFalse) || bytes.Equal(inc, jsonNull):
			newOpts, _, err = jsonedit.Replace(opts, "include_usage", jsonTrue)
		default: // true (the client asked), or not a boolean
			return body, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("usage: inject include_usage: stream_options: %w", err)
		}
	default:
		return body, false, nil
	}
	out, _, err = jsonedit.Replace(body, "stream_options", newOpts)
	if err != nil {
		return nil, false, fmt.Errorf("usage: inject include_usage: %w", err)
	}
	return out, true, nil
}
