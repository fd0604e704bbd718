package provider

import (
	"net/url"
	"strings"
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
