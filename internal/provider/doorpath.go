package provider

import (
	"bytes"
	"net/url"
	"strings"
)

// What the doors of AWS-shaped client paths share (the Bedrock Runtime
// paths of Messages and of Converse): the model id segment of the path,
// and the SSE events of the answer they re-frame.

// BedrockModelSegment reads a Bedrock Runtime path as sent, "/model/{modelId}/{op}":
// the model id percent-decoded once, and the operation. ok is false for a
// path of another shape. An id that is empty, holds a "/" that was not
// encoded (the AWS SDKs encode an ARN's as %2F), is not valid
// percent-encoding, or still holds a percent-escape once decoded (doubly
// encoded: one reader would decode it once and another twice) is a
// *BodyError, with ok true.
func BedrockModelSegment(escapedPath string) (model, op string, ok bool, err *BodyError) {
	rest, found := strings.CutPrefix(escapedPath, "/model/")
	if !found {
		return "", "", false, nil
	}
	i := strings.LastIndexByte(rest, '/')
	if i < 0 {
		return "", "", false, nil
	}
	seg, op := rest[:i], rest[i+1:]
	if op == "" || strings.IndexByte(op, '%') >= 0 {
		return "", "", false, nil // the operation is never encoded: not a path of the door
	}
	if seg == "" || strings.IndexByte(seg, '/') >= 0 {
		return "", op, true, &BodyError{Code: "invalid_model", Msg: `the model id in the path must be one segment: percent-encode its "/" and ":" as %2F and %3A`}
	}
	id, uerr := url.PathUnescape(seg)
	if uerr != nil || id == "" || DoublyEncoded(id) {
		return "", op, true, &BodyError{Code: "non_canonical_path", Msg: "the model id in the path must be percent-encoded exactly once"}
	}
	return id, op, true, nil
}

// DoublyEncoded reports whether s, once decoded, still holds a
// percent-escape.
func DoublyEncoded(s string) bool {
	for i := strings.IndexByte(s, '%'); i >= 0; i = strings.IndexByte(s, '%') {
		if i+2 < len(s) && ishex(s[i+1]) && ishex(s[i+2]) {
			return true
		}
		s = s[i+1:]
	}
	return false
}

func ishex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// SSEFrames cuts an SSE byte stream, fed in any pieces, into its events (the
// event type and the data lines joined by "\n"), as the SSE specification
// dispatches them. Comments and fields other than event and data are
// dropped, and so is an event without data. The zero value is ready to
// use; doors use it to re-frame the SSE the request path writes.
type SSEFrames struct {
	line   []byte // a line not yet ended
	skipLF bool   // the last piece ended in a CR: a LF first in the next ends nothing
	typ    string
	data   []byte
	has    bool // a data line was seen
}

func (s *SSEFrames) Feed(p []byte, emit func(typ string, data []byte)) {
	if s.skipLF && len(p) > 0 {
		s.skipLF = false
		if p[0] == '\n' {
			p = p[1:]
		}
	}
	for len(p) > 0 {
		i := bytes.IndexAny(p, "\r\n")
		if i < 0 {
			s.line = append(s.line, p...)
			return
		}
		s.line = append(s.line, p[:i]...)
		// A CRLF ends one line, as do a lone CR and a lone LF.
		n := 1
		if p[i] == '\r' {
			if i+1 == len(p) {
				s.skipLF = true
			} else if p[i+1] == '\n' {
				n = 2
			}
		}
		p = p[i+n:]
		s.endLine(emit)
	}
}

func (s *SSEFrames) endLine(emit func(typ string, data []byte)) {
	line := s.line
	s.line = s.line[:0]
	if len(line) == 0 {
		if s.has {
			emit(s.typ, s.data) // "" for an event that names no type
		}
		s.typ, s.data, s.has = "", s.data[:0], false
		return
	}
	field, value, _ := bytes.Cut(line, []byte(":"))
	value = bytes.TrimPrefix(value, []byte(" "))
	switch string(field) {
	case "event":
		s.typ = string(value)
	case "data":
		if s.has {
			s.data = append(s.data, '\n')
		}
		s.data = append(s.data, value...)
		s.has = true
	}
}
