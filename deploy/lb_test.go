package deploy_test

import (
	"regexp"
	"testing"
)

// TestNginxLeavesTheBodyLimitToTheNode: the nginx recipe sets no body
// limit of its own, so an oversized body reaches the node, which answers
// 413 as a JSON error in the client's API shape (docs/api.md "Body
// limit"), not nginx's HTML 413.
func TestNginxLeavesTheBodyLimitToTheNode(t *testing.T) {
	conf := readText(t, "lb/nginx.conf")
	all := regexp.MustCompile(`(?m)^\s*client_max_body_size\s+(\S+);`).FindAllStringSubmatch(conf, -1)
	if len(all) != 1 || all[0][1] != "0" {
		t.Errorf("lb/nginx.conf client_max_body_size: %v, want exactly one, 0 (off): nginx would answer an oversized body with its own HTML 413", all)
	}
}
