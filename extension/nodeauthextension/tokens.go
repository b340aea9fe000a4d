package nodeauthextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/nodeauthextension"

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// minTokenLength is the shortest token the tokens file accepts: 16
// characters, the console's bound (openssl rand -hex 16 gives 32).
const minTokenLength = 16

// maxNodeName is the longest node name: a DNS name's 253 characters.
const maxNodeName = 253

// tokenEntry is one line of the tokens file. Only the token's SHA-256
// digest is held: no comparison time depends on the token's bytes, and a
// memory dump of the central holds no token.
type tokenEntry struct {
	digest [sha256.Size]byte
	node   string
	line   int
}

// tokenSet is one load of the tokens file.
type tokenSet struct {
	byDigest map[[sha256.Size]byte]tokenEntry
	nodes    int
}

// lookup finds the line of token.
func (s *tokenSet) lookup(token string) (tokenEntry, bool) {
	d := sha256.Sum256([]byte(token))
	e, ok := s.byDigest[d]
	if !ok || subtle.ConstantTimeCompare(e.digest[:], d[:]) != 1 {
		return tokenEntry{}, false
	}
	return e, true
}

// parseTokens reads a tokens file: "<token> <node>" a line, optionally a
// comment starting with # after them; blank lines and lines starting with
// # are skipped. A line without a node, a short token, a bad node name or
// a token on two lines is refused: the error names the file and the line
// (never the token).
func parseTokens(path string, data []byte) (*tokenSet, error) {
	set := &tokenSet{byDigest: map[[sha256.Size]byte]tokenEntry{}}
	nodes := map[string]bool{}
	var errs []error
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 64*1024)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("%s line %d: %s", path, n, fmt.Sprintf(format, args...)))
		}
		f := strings.Fields(line)
		if len(f) == 1 {
			bad(`a token without its node's name (want "<token> <node>": the node's host.name)`)
			continue
		}
		if len(f) > 2 && !strings.HasPrefix(f[2], "#") {
			bad(`%d words; want "<token> <node>", a comment after them starting with #`, len(f))
			continue
		}
		token, node := f[0], f[1]
		if len(token) < minTokenLength {
			bad("a token of %d characters; at least %d (openssl rand -hex 32)", len(token), minTokenLength)
			continue
		}
		if err := checkNodeName(node); err != nil {
			bad("node %s", err)
			continue
		}
		d := sha256.Sum256([]byte(token))
		if prev, dup := set.byDigest[d]; dup {
			bad("the token of line %d (node %q) again, for node %q: a token speaks for one node", prev.line, prev.node, node)
			continue
		}
		set.byDigest[d] = tokenEntry{digest: d, node: node, line: n}
		nodes[node] = true
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("%s line %d: %w", path, n+1, err))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(set.byDigest) == 0 {
		return nil, fmt.Errorf("%s: no \"<token> <node>\" line: no agent could send", path)
	}
	set.nodes = len(nodes)
	return set, nil
}

// checkNodeName accepts what a host name or a Kubernetes node name can be:
// letters, digits, '-', '.' and '_', at most 253 characters.
func checkNodeName(node string) error {
	if len(node) > maxNodeName {
		return fmt.Errorf("name of %d characters, at most %d", len(node), maxNodeName)
	}
	for _, r := range node {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_' {
			continue
		}
		return fmt.Errorf("%s: %s is not a host name's character", strconv.Quote(node), strconv.QuoteRune(r))
	}
	return nil
}
