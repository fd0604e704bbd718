package provider

import (
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// VertexGlobal is the Vertex AI location that is no region: its host is
// aiplatform.googleapis.com rather than {location}-aiplatform.googleapis.com.
const VertexGlobal = "global"

// VertexBaseURL is the base_url of Google's own Vertex AI endpoint for a
// location: https://aiplatform.googleapis.com for "global",
// https://{location}-aiplatform.googleapis.com for a region.
func VertexBaseURL(location string) string {
	if location == VertexGlobal {
		return "https://aiplatform.googleapis.com"
	}
	return "https://" + location + "-aiplatform.googleapis.com"
}

// VertexResource is the URL of a Vertex backend's project and location
// under its base URL (without trailing "/"):
// {base}/v1/projects/{project}/locations/{location}, which every Vertex
// envelope's URL extends with the publisher, the model and the method.
// Project and location are validated routing coordinates (lower-case
// letters, digits, "-"; "." and ":" in a domain-scoped project), none of
// which a path segment escapes.
func VertexResource(base *url.URL, project, location string) *url.URL {
	u := *base
	tail := "/v1/projects/" + project + "/locations/" + location
	u.Path = strings.TrimRight(base.Path, "/") + tail
	u.RawPath = ""
	if base.RawPath != "" {
		u.RawPath = strings.TrimRight(base.RawPath, "/") + tail
	}
	u.RawQuery, u.Fragment, u.RawFragment = "", "", ""
	return &u
}

// VertexModelURL is {resource}/publishers/{publisher}/models/{model}:{method}
// with the model escaped as one path segment (url.PathEscape); Path holds
// it unescaped, RawPath as sent.
func VertexModelURL(resource *url.URL, publisher, model, method string) *url.URL {
	u := *resource
	tail := "/publishers/" + publisher + "/models/"
	u.Path = resource.Path + tail + model + ":" + method
	u.RawPath = resource.EscapedPath() + tail + url.PathEscape(model) + ":" + method
	return &u
}

// Vertex AI's own clients (docs/api.md "Cloud client paths") name a model
// method at one of these paths, as sent:
//
//	/{version}/projects/{project}/locations/{location}/publishers/{publisher}/models/{model}:{method}
//	/{version}/publishers/{publisher}/models/{model}:{method}
//
// with {version} v1 or v1beta1; the second is Vertex AI express mode's,
// where an API key stands for the project.

// VertexModelPath reads a Vertex AI model method path for publisher
// ("anthropic", "google"): the public model it names and its method. ok is
// false for a path of another shape or publisher. The model is everything
// between "/models/" and the last ":", percent-decoded exactly once; it
// may hold a "/" (sent as it is, or as %2F) but no empty, "." or ".."
// segment, and nothing that is still a percent-escape once decoded. The
// project and location are the client's view of its account: they must
// be well formed and go no further. A path of this shape that breaks a
// rule is a *BodyError, with ok true; model is then "" when the model
// segment is what is wrong. method is returned in every case, so that a
// door claims only its own methods.
func VertexModelPath(escapedPath, publisher string) (model, method string, ok bool, err *BodyError) {
	rest, found := strings.CutPrefix(escapedPath, "/v1/")
	if !found {
		if rest, found = strings.CutPrefix(escapedPath, "/v1beta1/"); !found {
			return "", "", false, nil
		}
	}
	var project, location string
	if tail, scoped := strings.CutPrefix(rest, "projects/"); scoped {
		project, tail, _ = strings.Cut(tail, "/")
		tail, found = strings.CutPrefix(tail, "locations/")
		if !found {
			return "", "", false, nil
		}
		location, rest, _ = strings.Cut(tail, "/")
	}
	seg, found := strings.CutPrefix(rest, "publishers/"+publisher+"/models/")
	if !found {
		return "", "", false, nil
	}
	i := strings.LastIndexByte(seg, ':')
	if i < 0 {
		return "", "", false, nil
	}
	seg, method = seg[:i], seg[i+1:]
	if model, err = vertexModel(seg); err != nil {
		return "", method, true, err
	}
	if project != "" || location != "" {
		if !validVertexProject(project) {
			return model, method, true, Problemf("invalid_request", "the project in the path is not a Google Cloud project id or number")
		}
		if !validVertexLocation(location) {
			return model, method, true, Problemf("invalid_request", "the location in the path is not a Google Cloud location")
		}
	}
	return model, method, true, nil
}

// vertexModel decodes a Vertex path's model segment (see VertexModelPath).
func vertexModel(seg string) (string, *BodyError) {
	for part := range strings.SplitSeq(seg, "/") {
		// %2E is ".": a path cleaner in front would see a dot segment.
		p, err := url.PathUnescape(part)
		if err != nil {
			return "", Problemf("non_canonical_path", "the model in the path must be percent-encoded at most once")
		}
		if p == "" || p == "." || p == ".." {
			return "", Problemf("invalid_model", "the model in the path must be a model name: no empty, \".\" or \"..\" segment")
		}
	}
	model, _ := url.PathUnescape(seg) // each segment decodes
	if stillEscaped(model) {
		return "", Problemf("non_canonical_path", "the model in the path must be percent-encoded at most once")
	}
	if !utf8.ValidString(model) || strings.ContainsFunc(model, unicode.IsControl) {
		return "", Problemf("invalid_model", "the model in the path must be valid UTF-8 without control characters")
	}
	return model, nil
}

// stillEscaped reports whether s, once decoded, still holds a
// percent-escape (it was encoded twice: one reader would decode it once,
// another twice).
func stillEscaped(s string) bool {
	for i := strings.IndexByte(s, '%'); i >= 0; i = strings.IndexByte(s, '%') {
		if i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			return true
		}
		s = s[i+1:]
	}
	return false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// validVertexProject: a Google Cloud project id (6-30 of [a-z0-9-],
// starting with a letter, not ending in "-"; "example.com:" before it in
// a domain-scoped project) or a project number (1-20 digits).
func validVertexProject(s string) bool {
	if n := len(s); n >= 1 && n <= 20 && strings.Trim(s, "0123456789") == "" {
		return true
	}
	if domain, id, scoped := strings.Cut(s, ":"); scoped {
		return validDomain(domain) && validVertexProjectID(id)
	}
	return validVertexProjectID(s)
}

func validVertexProjectID(s string) bool {
	return len(s) >= 6 && len(s) <= 30 && validVertexLocation(s)
}

// validVertexLocation: 1-32 of [a-z0-9-], starting with a letter and not
// ending in "-" ("us-east5", "europe-west1", "global", "us").
func validVertexLocation(s string) bool {
	if len(s) == 0 || len(s) > 32 || s[0] < 'a' || s[0] > 'z' || s[len(s)-1] == '-' {
		return false
	}
	for i := range len(s) {
		if c := s[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// validDomain: dot-separated labels of [a-z0-9-], 1-63 each, none
// starting or ending in "-", 253 in all.
func validDomain(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if len(label) == 0 || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := range len(label) {
			if c := label[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}
