package semconv

// Attributes of the authentication data (client.Info's Auth) that the
// nodeauth extension binds to each request of an agent, and that the
// provenance processor's bind_to_auth mode reads: the names cross the
// boundary between the two components, so they are defined here once.
const (
	// AuthAttrNode is the node the credential speaks for: the host.name
	// that agent stamps on everything (a string).
	AuthAttrNode = "node"
	// AuthAttrSubject is who presented the credential, for logs: the
	// tokens file's line ("tokens_file:<line>") or the ServiceAccount's
	// user name and bound pod ("system:serviceaccount:ns:name pod=...").
	AuthAttrSubject = "subject"
)
