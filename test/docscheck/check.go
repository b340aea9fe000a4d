package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Problem is one stale statement: where it is and what is wrong with it.
type Problem struct {
	File string // slash-separated, relative to the repository root
	Line int
	Msg  string
}

func (p Problem) String() string { return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg) }

// textLine is one line of checked text: a Markdown line, or the comment of
// a YAML line.
type textLine struct {
	n    int
	text string
}

// doc is the checked text of one file.
type doc struct {
	path  string // slash-separated, relative to the repository root
	lines []textLine
}

// Check runs every check over the repository at root.
func Check(root string) ([]Problem, error) {
	docs, err := collect(root)
	if err != nil {
		return nil, err
	}
	var problems []Problem
	problems = append(problems, checkPaths(root, docs)...)

	n, err := catalogueLen(root)
	if err != nil {
		return nil, err
	}
	problems = append(problems, checkFieldCounts(docs, n)...)

	cps, err := checkComponents(root)
	if err != nil {
		return nil, err
	}
	problems = append(problems, cps...)

	sort.SliceStable(problems, func(i, j int) bool {
		if problems[i].File != problems[j].File {
			return problems[i].File < problems[j].File
		}
		return problems[i].Line < problems[j].Line
	})
	return problems, nil
}

// skipDir reports whether a walk leaves out a directory: version control
// and tool state (dot directories), build outputs, test inputs and
// dependencies.
func skipDir(rel, name string) bool {
	if rel == "." {
		return false
	}
	if strings.HasPrefix(name, ".") {
		return true
	}
	switch name {
	case "_build", "testdata", "node_modules", "vendor", "__pycache__":
		return true
	}
	// make's outputs at the top.
	return rel == "dist" || rel == "bin"
}

// collect reads every Markdown file in the repository and the comments of
// the YAML files under distributions/ and deploy/ (and builder-config.yaml,
// the all-in-one's manifest).
func collect(root string) ([]doc, error) {
	var docs []doc
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if skipDir(rel, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		var extract func([]byte) []textLine
		switch {
		case strings.HasSuffix(rel, ".md"):
			extract = markdownLines
		case (strings.HasSuffix(rel, ".yaml") || strings.HasSuffix(rel, ".yml")) &&
			(strings.HasPrefix(rel, "distributions/") || strings.HasPrefix(rel, "deploy/") || rel == "builder-config.yaml"):
			extract = yamlComments
		default:
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		docs = append(docs, doc{path: rel, lines: extract(data)})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the docs under %s: %w", root, err)
	}
	return docs, nil
}

func splitLines(data []byte) []string {
	var lines []string
	s := bufio.NewScanner(bytes.NewReader(data))
	s.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for s.Scan() {
		lines = append(lines, s.Text())
	}
	return lines
}

// markdownLines: every line, code blocks included (the commands in them
// name repository paths too).
func markdownLines(data []byte) []textLine {
	var out []textLine
	for i, l := range splitLines(data) {
		out = append(out, textLine{n: i + 1, text: l})
	}
	return out
}

// yamlComments: the comment of each line that has one, from the '#' that
// starts it (at the start of the line or after a blank, outside quotes).
func yamlComments(data []byte) []textLine {
	var out []textLine
	for i, l := range splitLines(data) {
		if c, ok := yamlComment(l); ok {
			out = append(out, textLine{n: i + 1, text: c})
		}
	}
	return out
}

func yamlComment(line string) (string, bool) {
	var quote byte
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			// A quote opens a scalar only where a value starts; in plain
			// text (it's, a comment's "word") it is a character.
			if i == 0 || strings.ContainsRune(" \t[{,:-", rune(line[i-1])) {
				quote = c
			}
		case c == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return line[i+1:], true
		}
	}
	return "", false
}
