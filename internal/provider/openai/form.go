package openai

import (
	"bytes"
	"fmt"
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
//
// Each part's Content-Disposition is decoded by [parseDisposition], never
// by mime.ParseMediaType: that one merges what readers disagree on (its
// name* wins over name, where busboy and Python's cgi and email read
// name), and a part that one reader files under "model" or "stream" and
// another under a different name would route and bill one request while
// the provider serves another.

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
		d, berr := parseDisposition(cd[0])
		if berr != nil {
			berr.Msg = fmt.Sprintf("form part %d: %s", i+1, berr.Msg)
			return berr
		}
		fp := &parts[i]
		fp.name, fp.file, fp.encoded = d.name, d.file, len(p.Header.Values("Content-Transfer-Encoding")) > 0
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

// disposition is what a form part's Content-Disposition says: the field
// name, and whether a filename is given.
type disposition struct {
	name string
	file bool
}

// parseDisposition decodes a form part's Content-Disposition value
// exactly (RFC 7578 section 4.2): the type form-data (any letter case),
// then parameters `; key=value`, a value a token or a quoted string, with
// spaces and tabs around the separators. It refuses, as
// ambiguous_member, what readers of forms read differently:
//
//   - a parameter twice, in any letter case (mime.ParseMediaType keeps
//     equal twins, others keep the first or the last);
//   - an extended parameter (name*, filename*, RFC 2231/5987) or a
//     continuation (name*0): RFC 7578 forbids them in a form, and
//     mime.ParseMediaType lets name* win over name where busboy and
//     Python's cgi and email read name;
//   - a backslash in a quoted name (a quoted-pair to some readers, to
//     mime.ParseMediaType one before a letter, to Python's cgi only before
//     a quote or a backslash), and a backslash before a quote or a
//     backslash in any other quoted value (readers disagree on where the
//     value ends).
//
// Anything else that is not the grammar above (a control character, a
// non-ASCII byte outside a quoted string, a missing field name) is
// invalid_multipart.
func parseDisposition(v string) (disposition, *provider.BodyError) {
	var d disposition
	i := skipSpace(v, 0)
	typ, i := token(v, i)
	if !strings.EqualFold(typ, "form-data") {
		return d, provider.Problemf("invalid_multipart", "the Content-Disposition must be form-data")
	}
	var (
		keys  [maxParams]string // the parameters read so far
		nkeys int
	)
	for {
		i = skipSpace(v, i)
		if i == len(v) {
			break
		}
		if v[i] != ';' {
			return d, provider.Problemf("invalid_multipart", "the Content-Disposition is not a list of parameters")
		}
		i = skipSpace(v, i+1)
		if i == len(v) {
			break // a trailing ";", as mime.ParseMediaType reads it
		}
		var key string
		key, i = token(v, i)
		i = skipSpace(v, i)
		if key == "" || i == len(v) || v[i] != '=' {
			return d, provider.Problemf("invalid_multipart", "the Content-Disposition is not a list of parameters")
		}
		i = skipSpace(v, i+1)
		var (
			value string
			slash bool // a backslash in a quoted value
			berr  *provider.BodyError
		)
		value, slash, i, berr = paramValue(v, i)
		if berr != nil {
			return d, berr
		}
		if strings.IndexByte(key, '*') >= 0 {
			return d, provider.Problemf("ambiguous_member", "the Content-Disposition has the extended parameter %q: a form must not use them (RFC 7578), and readers disagree on them", strings.ToLower(key))
		}
		for _, k := range keys[:nkeys] {
			if strings.EqualFold(k, key) {
				return d, provider.Problemf("ambiguous_member", "the Content-Disposition has the parameter %q twice", strings.ToLower(key))
			}
		}
		if nkeys == maxParams {
			return d, provider.Problemf("invalid_multipart", "the Content-Disposition has more than %d parameters", maxParams)
		}
		keys[nkeys] = key
		nkeys++
		switch {
		case strings.EqualFold(key, "name"):
			if slash {
				return d, provider.Problemf("ambiguous_member", "the Content-Disposition has a backslash in its name, which readers decode differently")
			}
			d.name = value
		case strings.EqualFold(key, "filename"):
			d.file = true
		}
		// Readers that know no other parameter ignore it.
	}
	if d.name == "" {
		return d, provider.Problemf("invalid_multipart", "the Content-Disposition names no field")
	}
	return d, nil
}

// maxParams bounds the parameters of a Content-Disposition: a form part
// has a name and perhaps a filename.
const maxParams = 8

// paramValue reads the parameter value at v[i:], a token or a quoted
// string, and returns it (unquoted, its backslashes kept), whether a
// quoted value holds a backslash, and the index after it.
func paramValue(v string, i int) (value string, slash bool, next int, berr *provider.BodyError) {
	if i < len(v) && v[i] != '"' {
		value, next = token(v, i)
		if value == "" {
			return "", false, i, provider.Problemf("invalid_multipart", "the Content-Disposition has a parameter without a value")
		}
		return value, false, next, nil
	}
	for j := i + 1; j < len(v); j++ {
		switch c := v[j]; {
		case c == '"':
			return v[i+1 : j], slash, j + 1, nil
		case c == '\\':
			if j+1 < len(v) && (v[j+1] == '"' || v[j+1] == '\\') {
				return "", false, i, provider.Problemf("ambiguous_member", "the Content-Disposition has an escaped quote or backslash, where readers disagree on the value's end")
			}
			slash = true
		case c < ' ' && c != '\t', c == 0x7f:
			return "", false, i, provider.Problemf("invalid_multipart", "the Content-Disposition has a control character")
		}
	}
	return "", false, i, provider.Problemf("invalid_multipart", "the Content-Disposition has an unterminated quoted string")
}

// skipSpace returns the index of the first byte at or after i in v that
// is not a space or a tab.
func skipSpace(v string, i int) int {
	for i < len(v) && (v[i] == ' ' || v[i] == '\t') {
		i++
	}
	return i
}

// token returns the RFC 2045 token at v[i:] (possibly empty) and the
// index after it.
func token(v string, i int) (string, int) {
	j := i
	for j < len(v) && tokenByte(v[j]) {
		j++
	}
	return v[i:j], j
}

// tokenByte reports whether c may appear in an RFC 2045 token: printable
// ASCII but space and the tspecials.
func tokenByte(c byte) bool {
	return c > ' ' && c < 0x7f && strings.IndexByte(`()<>@,;:\"/[]?=`, c) < 0
}
