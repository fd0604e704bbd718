package openai

import (
	"bytes"
	"io"
	"mime"
	"mime/multipart"
	"strings"
	"unicode/utf8"

	"github.com/scootgate/scootgate/internal/provider"
)

// Multipart bodies (audio transcriptions and translations): the node
// routes on the "model" form field and rewrites only that field's value.
// Every other byte (the other parts, their headers and order, the file's
// bytes, the boundary) is the client's.
//
// The inspection is exact in the sense of [provider.Scan]: the node finds
// the parts with its own strict scan (CRLF line ends, no preamble, nothing
// after the closing delimiter but one CRLF) and with mime/multipart, and
// refuses a body on which the two disagree, so that no part is seen by
// one reader and not by another. A form field it reads (model, stream)
// must appear once; a part named like it in another letter case, a part
// whose Content-Disposition does not parse or names no field, or one with
// two Content-Disposition headers is refused too.

// formPart is one part of a multipart body: its field name, whether it
// carries a filename or a transfer encoding, and where its content is.
type formPart struct {
	name       string
	file       bool
	encoded    bool
	start, end int
}

// inspectForm reads a multipart/form-data body: the model (required, a
// plain field), and stream ("true" or "false"; true needs the stream
// capability).
func inspectForm(body []byte, contentType string) (provider.Request, *provider.BodyError) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return provider.Request{}, provider.Problemf("invalid_content_type", "the body must be multipart/form-data with a boundary")
	}
	parts, berr := formParts(body, params["boundary"])
	if berr != nil {
		return provider.Request{}, berr
	}
	var model, stream *formPart
	for i := range parts {
		p := &parts[i]
		var at **formPart
		switch {
		case p.name == "model":
			at = &model
		case p.name == "stream":
			at = &stream
		case strings.EqualFold(p.name, "model") || strings.EqualFold(p.name, "stream"):
			return provider.Request{}, provider.Problemf("ambiguous_member", "form field %q must appear only in lower case", strings.ToLower(p.name))
		default:
			continue
		}
		if *at != nil {
			return provider.Request{}, provider.Problemf("ambiguous_member", "form field %q must appear only once", p.name)
		}
		if p.file || p.encoded {
			return provider.Request{}, provider.Problemf("invalid_"+p.name, "form field %q must be a plain field, without a filename or a transfer encoding", p.name)
		}
		*at = p
	}
	if model == nil {
		return provider.Request{}, &provider.BodyError{Code: "missing_model", Msg: `missing required form field "model"`}
	}
	value := body[model.start:model.end]
	if len(value) == 0 || !utf8.Valid(value) || bytes.ContainsAny(value, "\r\n") {
		return provider.Request{}, &provider.BodyError{Code: "invalid_model", Msg: `form field "model" must be a non-empty line of text`}
	}
	r := provider.Request{Model: string(value), ModelAt: [2]int{model.start, model.end}, ModelRaw: true}
	if stream != nil {
		switch string(body[stream.start:stream.end]) {
		case "true":
			r.Stream, r.Need = true, provider.CapStream
		case "false":
		default:
			return provider.Request{}, &provider.BodyError{Code: "invalid_stream", Msg: `form field "stream" must be true or false`}
		}
	}
	return r, nil
}

var (
	crlf     = []byte("\r\n")
	crlfCRLF = []byte("\r\n\r\n")
	dashes   = []byte("--")
)

// malformed is the refusal of a body that is not a multipart form both
// readers see the same way.
func malformed() *provider.BodyError {
	return provider.Problemf("invalid_multipart", "the body is not a well-formed multipart/form-data body")
}

// formParts finds the parts of body: by a strict scan for their byte
// offsets, checked against what mime/multipart reads.
func formParts(body []byte, boundary string) ([]formPart, *provider.BodyError) {
	dash := []byte("--" + boundary)
	delim := []byte("\r\n--" + boundary)
	if !bytes.HasPrefix(body, dash) {
		return nil, malformed()
	}
	var parts []formPart
	pos := len(dash)
	for {
		rest := body[pos:]
		if bytes.HasPrefix(rest, dashes) { // the closing delimiter
			if tail := rest[2:]; len(tail) != 0 && !bytes.Equal(tail, crlf) {
				return nil, malformed()
			}
			break
		}
		if !bytes.HasPrefix(rest, crlf) {
			return nil, malformed()
		}
		pos += 2
		start := pos + 2 // a part without headers: its blank line at once
		if !bytes.HasPrefix(body[pos:], crlf) {
			i := bytes.Index(body[pos:], crlfCRLF)
			if i < 0 {
				return nil, malformed()
			}
			start = pos + i + 4
		}
		i := bytes.Index(body[start:], delim)
		if i < 0 {
			return nil, malformed()
		}
		parts = append(parts, formPart{start: start, end: start + i})
		pos = start + i + len(delim)
	}
	return parts, checkParts(body, boundary, parts)
}

// checkParts reads body with mime/multipart and requires the same parts
// with the same contents as the scan found, filling in their names.
func checkParts(body []byte, boundary string, parts []formPart) *provider.BodyError {
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	var buf [4096]byte
	for i := 0; ; i++ {
		p, err := mr.NextRawPart()
		if err == io.EOF {
			if i != len(parts) {
				return malformed()
			}
			return nil
		}
		if err != nil || i >= len(parts) {
			return malformed()
		}
		cd := p.Header.Values("Content-Disposition")
		if len(cd) != 1 {
			return malformed()
		}
		disp, params, err := mime.ParseMediaType(cd[0])
		if err != nil || disp != "form-data" || params["name"] == "" {
			return malformed()
		}
		_, file := params["filename"]
		fp := &parts[i]
		fp.name, fp.file, fp.encoded = params["name"], file, len(p.Header.Values("Content-Transfer-Encoding")) > 0
		// The part's content must be the scanned bytes, read in pieces.
		want := body[fp.start:fp.end]
		for {
			n, err := p.Read(buf[:])
			if n > len(want) || !bytes.Equal(buf[:n], want[:n]) {
				return malformed()
			}
			want = want[n:]
			if err == io.EOF {
				break
			}
			if err != nil {
				return malformed()
			}
		}
		if len(want) != 0 {
			return malformed()
		}
	}
}
