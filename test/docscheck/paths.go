package main

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// repoPath finds what looks like a repository path: a word that starts
// with one of the repository's top-level folders (after a blank, a quote,
// a bracket, '=', or at the start of the text; not after '/' or a letter,
// so that a URL or /var/lib/... is not one), optionally after "./".
var repoPath = regexp.MustCompile("(?:^|[\\s(\\[`\"'=,;|>])(?:\\./)?((?:" + strings.Join(topFolders, "|") + ")/[^\\s`\"'()\\[\\]|]*)")

// topFolders are the top-level folders a path in the docs starts with.
var topFolders = []string{
	"deploy", "docs", "distributions", "receiver", "processor", "exporter",
	"connector", "extension", "internal", "cmd", "test", "packaging", "sdk",
	"tools", "mk", "dist", "bin", "_build",
}

// generated are the folders the build creates (make build, make release,
// the tests); a path under them is not looked for.
var generated = []string{"dist/", "bin/", "_build/"}

// mdLink finds a Markdown link's target: [text](target) or
// [text](target "title").
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

var (
	uriScheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	// A line or a range in a file: fields.go:115, rules.yaml:10-20.
	lineSuffix = regexp.MustCompile(`:\d+(?:-\d+)?$`)
	braces     = regexp.MustCompile(`\{([^{}]*)\}`)
	// A Go identifier after a package path: internal/steprecord.TraceID.
	goSymbol = regexp.MustCompile(`(/[a-z0-9_]+)\.[A-Z][A-Za-z0-9_]*$`)
	// A placeholder: <name>, $(VAR), ${VAR}, $VAR, {{ .Values.x }}.
	placeholder = regexp.MustCompile(`<|\$|\{\{`)
)

// checkPaths reports every repository path named in docs that does not
// exist, and every relative Markdown link whose target does not.
func checkPaths(root string, docs []doc) []Problem {
	var problems []Problem
	for _, d := range docs {
		dir := path.Dir(d.path)
		for _, l := range d.lines {
			seen := map[string]bool{}
			for _, m := range repoPath.FindAllStringSubmatch(l.text, -1) {
				tok := m[1]
				if seen[tok] {
					continue
				}
				seen[tok] = true
				if !pathExists(root, dir, tok) {
					problems = append(problems, Problem{d.path, l.n, fmt.Sprintf("%s does not exist", tok)})
				}
			}
			if !strings.HasSuffix(d.path, ".md") {
				continue
			}
			for _, m := range mdLink.FindAllStringSubmatch(l.text, -1) {
				target := m[1]
				if uriScheme.MatchString(target) || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "/") {
					continue
				}
				target, _, _ = strings.Cut(target, "#")
				if seen[target] || seen[strings.TrimPrefix(target, "./")] {
					continue // reported, or found, as a path above
				}
				seen[target] = true
				if !exists(filepath.Join(root, filepath.FromSlash(dir), filepath.FromSlash(target))) {
					problems = append(problems, Problem{d.path, l.n, fmt.Sprintf("link target %s does not exist (relative to %s/)", target, dir)})
				}
			}
		}
	}
	return problems
}

// pathExists resolves a path as written in the docs, relative to the
// repository root or to the folder of the file that names it, allowing:
// the sentence's punctuation after it; a line (":115") or an anchor
// ("#section"); Go's "/..." package patterns; <placeholders> and
// $(make) or ${shell} variables (the folder before them must exist);
// {a,b} alternatives (each must exist); globs (at least one match); and
// paths under the build's output folders (not looked for). A module path
// with a version (extension/x@v1.2.3, another module's) is not one of the
// repository's.
func pathExists(root, dir, tok string) bool {
	if strings.Contains(tok, "@") {
		return true
	}
	tok = strings.TrimRight(tok, ",;:!?*")
	tok = strings.TrimSuffix(tok, "…")
	if strings.HasSuffix(tok, "...") {
		tok = strings.TrimSuffix(tok, "...")
	} else {
		tok = strings.TrimRight(tok, ".")
	}
	tok, _, _ = strings.Cut(tok, "#")
	tok = lineSuffix.ReplaceAllString(tok, "")
	tok = goSymbol.ReplaceAllString(tok, "$1")
	for _, g := range generated {
		if strings.HasPrefix(tok+"/", g) {
			return true
		}
	}
	if i := placeholder.FindStringIndex(tok); i != nil {
		tok = tok[:strings.LastIndex(tok[:i[0]], "/")+1]
	}
	if m := braces.FindStringSubmatchIndex(tok); m != nil {
		for _, alt := range strings.Split(tok[m[2]:m[3]], ",") {
			if !pathExists(root, dir, tok[:m[0]]+alt+tok[m[1]:]) {
				return false
			}
		}
		return true
	}
	for _, base := range []string{root, filepath.Join(root, filepath.FromSlash(dir))} {
		p := filepath.Join(base, filepath.FromSlash(tok))
		if strings.ContainsAny(tok, "*?") {
			if matches, err := filepath.Glob(p); err == nil && len(matches) > 0 {
				return true
			}
			continue
		}
		if exists(p) {
			return true
		}
	}
	return false
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
