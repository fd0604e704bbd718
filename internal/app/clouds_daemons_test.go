package app

import "testing"

// The Vertex and Azure suites through the real Debian proxies, as the
// Bedrock suite runs (bedrock_test.go): the provider requests and the
// token grants both go through dante-server (SOCKS5) or tinyproxy (HTTP
// CONNECT with Basic auth).

func TestVertexThroughDante(t *testing.T) {
	addr := requireDaemon(t, "SCOOTGATE_DANTE_ADDR", "dante-server (SOCKS5)")
	runVertexSuite(t, startStack(t, stackOptions{proxyURL: "socks5://" + addr, vertex: true}))
}

func TestVertexThroughTinyproxy(t *testing.T) {
	u := requireDaemon(t, "SCOOTGATE_TINYPROXY_URL", "tinyproxy (HTTP CONNECT)")
	runVertexSuite(t, startStack(t, stackOptions{proxyURL: u, vertex: true}))
}

func TestAzureThroughDante(t *testing.T) {
	addr := requireDaemon(t, "SCOOTGATE_DANTE_ADDR", "dante-server (SOCKS5)")
	s := startStack(t, stackOptions{proxyURL: "socks5://" + addr, azure: true, azureVersion: azureVersion})
	runAzureSuite(t, s, openAIClient(s, clientKey), "/openai/deployments/"+azureDeployment+"/chat/completions", "/openai/responses")
}

func TestAzureThroughTinyproxy(t *testing.T) {
	u := requireDaemon(t, "SCOOTGATE_TINYPROXY_URL", "tinyproxy (HTTP CONNECT)")
	s := startStack(t, stackOptions{proxyURL: u, azure: true, azureVersion: azureVersion})
	runAzureSuite(t, s, azureClient(s, clientKey, azureVersion), "/openai/deployments/"+azureDeployment+"/chat/completions", "/openai/responses")
}
