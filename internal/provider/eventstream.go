package provider

import (
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// AWSEventStream reads an AWS event stream (the framing of Bedrock's
// streaming answers, decoded and CRC-checked by the AWS SDK's codec) one
// message at a time: Frame appends what a message becomes (an SSE event,
// or nothing) to what Read yields next, so that a reader that flushes per
// event flushes per message. A frame the codec refuses ends the stream
// with Bad wrapped; nothing of it is yielded. Not safe for concurrent use.
type AWSEventStream struct {
	r     io.Reader
	dec   *eventstream.Decoder
	bad   error
	frame func(m eventstream.Message, out []byte) ([]byte, error)

	payload []byte // the decoder's payload buffer, reused
	out     []byte // bytes not yet read
	off     int
	err     error // sticky
}

// NewAWSEventStream returns the reader of the event stream r whose
// messages frame turns into bytes; bad is the error a broken stream wraps.
func NewAWSEventStream(r io.Reader, bad error, frame func(m eventstream.Message, out []byte) ([]byte, error)) *AWSEventStream {
	return &AWSEventStream{r: r, dec: eventstream.NewDecoder(), bad: bad, frame: frame, payload: make([]byte, 0, 4096)}
}

func (s *AWSEventStream) Read(p []byte) (int, error) {
	for s.off == len(s.out) {
		if s.err != nil {
			return 0, s.err
		}
		s.out, s.off = s.out[:0], 0
		s.err = s.next()
	}
	n := copy(p, s.out[s.off:])
	s.off += n
	return n, nil
}

// next decodes one message and frames it into s.out; io.EOF at the end of
// the stream between messages.
func (s *AWSEventStream) next() error {
	m, err := s.dec.Decode(s.r, s.payload[:0])
	if err != nil {
		if err == io.EOF { // the SDK's codec returns it unwrapped at a message boundary
			return io.EOF
		}
		return fmt.Errorf("%w: %w", s.bad, err)
	}
	if cap(m.Payload) > cap(s.payload) {
		s.payload = m.Payload[:0]
	}
	s.out, err = s.frame(m, s.out)
	return err
}

// EventStreamHeader returns the string value of an event-stream header,
// "" when it is absent or not a string.
func EventStreamHeader(hs eventstream.Headers, name string) string {
	if v, ok := hs.Get(name).(eventstream.StringValue); ok {
		return string(v)
	}
	return ""
}
