package faultconsoleextension

import (
	"crypto/sha256"
	"encoding/base64"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The page is assembled from web/: every include went in, and the CSP
// names every inline block of the assembled page by hash.
func TestPageAssembled(t *testing.T) {
	page := string(pageHTML)
	assert.NotContains(t, page, "include:", "an include comment was left in the page")
	require.Contains(t, indexHTML, includeLifecycleJS)
	require.Contains(t, indexHTML, includeLifecycleCSS)
	assert.Contains(t, page, "function lifecycleRow(")
	assert.Contains(t, page, "lifecycleRow(n, data.steps || [], open, 6)")
	assert.Contains(t, page, "ol.lc-strip {")
	blocks := regexp.MustCompile(`(?s)<(script|style)>(.*?)</(?:script|style)>`).FindAllStringSubmatch(page, -1)
	require.Len(t, blocks, 3, "the script and two style blocks")
	csp := pageCSP()
	var scripts []string
	for _, b := range blocks {
		sum := sha256.Sum256([]byte(b[2]))
		src, _, _ := strings.Cut(strings.SplitN(csp, b[1]+"-src ", 2)[1], ";")
		assert.Contains(t, src, "'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'", "the %s block's hash", b[1])
		if b[1] == "script" {
			scripts = append(scripts, b[2])
		}
	}
	// The lifecycle's code is in the page's one script, using its helpers.
	require.Len(t, scripts, 1)
	script := scripts[0]
	assert.Less(t, strings.Index(script, "function el("), strings.Index(script, "function lifecycleRow("))
	// No value is written as HTML: el() sets text.
	for _, f := range []string{lifecycleJS, indexHTML} {
		assert.NotContains(t, f, "innerHTML")
		assert.NotContains(t, f, "insertAdjacentHTML")
	}
	assert.NotContains(t, lifecycleJS, "style=", "the CSP allows no style attribute")
}
