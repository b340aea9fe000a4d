// Package nodeauthextension implements the "nodeauth" server
// authenticator: it admits an agent only with a credential that names one
// node, and binds that node to the request (client.Info's Auth, attribute
// semconv.AuthAttrNode), so that the provenance processor's bind_to_auth
// mode can refuse what the agent claims about any other node. Credentials
// come from a tokens file (one token per node, the node's name beside it)
// or from Kubernetes: the agent pod's projected, audience-bound
// ServiceAccount token, checked with a TokenReview whose user must be the
// agents' ServiceAccount and whose extra names the pod's node.
package nodeauthextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/nodeauthextension"
