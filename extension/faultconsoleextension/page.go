package faultconsoleextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/faultconsoleextension"

import (
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"net/http"
	"regexp"
	"strings"
)

// pageHTML is the console's page: one document, no external asset (the
// machines are offline). It holds no data: it asks for the token and reads
// the API. web/index.html is its body; the repair loop's view
// (web/lifecycle.js and web/lifecycle.css) goes in at the include
// comments, inside the page's script and as a second style block.
var pageHTML = assemblePage(indexHTML, lifecycleJS, lifecycleCSS)

var (
	//go:embed web/index.html
	indexHTML string
	//go:embed web/lifecycle.js
	lifecycleJS string
	//go:embed web/lifecycle.css
	lifecycleCSS string
)

// The include comments of web/index.html.
const (
	includeLifecycleJS  = "  // include: lifecycle.js\n"
	includeLifecycleCSS = "<!-- include: lifecycle.css -->\n"
)

func assemblePage(index, js, css string) []byte {
	return []byte(strings.NewReplacer(includeLifecycleJS, js, includeLifecycleCSS, "<style>\n"+css+"</style>\n").Replace(index))
}

var inlineBlock = regexp.MustCompile(`(?s)<(script|style)>(.*?)</(?:script|style)>`)

// pageCSP is the page's Content-Security-Policy: its own inline script and
// style by hash, connections to this origin only, nothing else.
func pageCSP() string {
	var scripts, styles []string
	for _, m := range inlineBlock.FindAllSubmatch(pageHTML, -1) {
		sum := sha256.Sum256(m[2])
		h := "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
		if string(m[1]) == "script" {
			scripts = append(scripts, h)
		} else {
			styles = append(styles, h)
		}
	}
	return "default-src 'none'; script-src " + strings.Join(append(scripts, "'self'"), " ") +
		"; style-src " + strings.Join(append(styles, "'self'"), " ") +
		"; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}

func (a *api) page(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", a.csp)
	_, _ = w.Write(pageHTML)
}
