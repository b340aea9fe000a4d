package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// manifests are the ocb manifests, by the name README.md's Components
// table gives their distribution in its kind column.
var manifests = map[string]string{
	"all-in-one": "builder-config.yaml",
	"agent":      "distributions/agent/manifest.yaml",
	"gateway":    "distributions/gateway/manifest.yaml",
}

// componentKinds are a component folder's kind: receiver/x is a receiver,
// listed under a manifest's receivers.
var componentKinds = []string{"receiver", "processor", "exporter", "connector", "extension"}

type manifestEntry struct {
	GoMod  string `yaml:"gomod"`
	Import string `yaml:"import"`
}

// manifest is what checkComponents reads of an ocb manifest: the
// components of each kind, by import path, with their module's version.
type manifest map[string]map[string]string // kind -> import path -> version

func readManifest(root, rel string) (manifest, error) {
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		return nil, err
	}
	// dist, replaces and the rest are not lists of components.
	var doc map[string]yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	raw := map[string][]manifestEntry{}
	for _, kind := range componentKinds {
		node, ok := doc[kind+"s"]
		if !ok {
			continue
		}
		var entries []manifestEntry
		if err := node.Decode(&entries); err != nil {
			return nil, fmt.Errorf("%s: %ss: %w", rel, kind, err)
		}
		raw[kind] = entries
	}
	m := manifest{}
	for kind, entries := range raw {
		m[kind] = map[string]string{}
		for _, e := range entries {
			mod, version, _ := strings.Cut(strings.TrimSpace(e.GoMod), " ")
			imp := e.Import
			if imp == "" {
				imp = mod
			}
			m[kind][imp] = version
		}
	}
	return m, nil
}

func modulePath(root string) (string, error) {
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(l, "module "); ok {
			return strings.TrimSpace(rest), nil
		}
	}
	return "", fmt.Errorf("go.mod names no module")
}

var (
	// A linked component folder, then its type: [`x`](receiver/xreceiver) (`x`).
	componentLink = regexp.MustCompile("\\]\\(((?:" + strings.Join(componentKinds, "|") + ")/[a-z0-9_]+)/?\\)(?:\\s*\\(`([a-z0-9_]+)`\\))?")
	// A contrib component named in words with its version: tail sampling (contrib, v0.161.0).
	contribRow = regexp.MustCompile(`^(.+?)\s*\(contrib,\s*(v\d+\.\d+\.\d+)\)$`)
	// The distributions a kind cell names: processor (agent, gateway).
	kindCell    = regexp.MustCompile(`^([a-z]+)[^(]*(?:\(([^)]*)\))?`)
	metadataTyp = regexp.MustCompile(`(?m)^type:\s*(\S+)`)
)

// checkComponents checks README.md's "Components" table against the ocb
// manifests: every linked component folder (receiver/, processor/, ...) is
// in at least one manifest, under its kind; the type after its link is its
// metadata.yaml's; each distribution its kind cell names (agent, gateway,
// all-in-one) has it; and a contrib component named in words ("tail
// sampling (contrib, v0.161.0)") is in a manifest at that version.
func checkComponents(root string) ([]Problem, error) {
	const readme = "README.md"
	module, err := modulePath(root)
	if err != nil {
		return nil, err
	}
	loaded := map[string]manifest{}
	names := make([]string, 0, len(manifests))
	for name, rel := range manifests {
		m, err := readManifest(root, rel)
		if err != nil {
			return nil, err
		}
		loaded[name] = m
		names = append(names, name)
	}
	sort.Strings(names)

	rows, err := componentRows(root, readme)
	if err != nil {
		return nil, err
	}
	var problems []Problem
	report := func(line int, format string, args ...any) {
		problems = append(problems, Problem{readme, line, fmt.Sprintf(format, args...)})
	}
	for _, r := range rows {
		var dists []string
		kind := ""
		if m := kindCell.FindStringSubmatch(r.cells[1]); m != nil {
			kind = m[1]
			for _, d := range strings.Split(m[2], ",") {
				if _, ok := manifests[strings.TrimSpace(d)]; ok {
					dists = append(dists, strings.TrimSpace(d))
				}
			}
		}
		links := componentLink.FindAllStringSubmatch(r.cells[0], -1)
		for _, l := range links {
			dir, typ := l[1], l[2]
			dirKind, _, _ := strings.Cut(dir, "/")
			imp := module + "/" + dir
			var in []string
			for _, name := range names {
				if _, ok := loaded[name][dirKind][imp]; ok {
					in = append(in, name)
				}
			}
			if len(in) == 0 {
				report(r.line, "component %s is in no ocb manifest's %ss (%s)", dir, dirKind, manifestList())
				continue
			}
			for _, d := range dists {
				if _, ok := loaded[d][dirKind][imp]; !ok {
					report(r.line, "component %s: the table says %s, but %s has no such %s", dir, d, manifests[d], dirKind)
				}
			}
			if typ != "" {
				meta, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(dir), "metadata.yaml"))
				if err == nil {
					if m := metadataTyp.FindSubmatch(meta); m != nil && string(m[1]) != typ {
						report(r.line, "component %s: the table says type %s, its metadata.yaml says %s", dir, typ, m[1])
					}
				}
			}
		}
		if len(links) > 0 {
			continue
		}
		m := contribRow.FindStringSubmatch(strings.TrimSpace(r.cells[0]))
		if m == nil || kind == "" {
			continue
		}
		suffix := "/" + strings.ReplaceAll(strings.ToLower(m[1]), " ", "") + kind
		version := m[2]
		found := false
		var versions []string
		for _, name := range names {
			for imp, v := range loaded[name][kind] {
				if strings.HasSuffix(imp, suffix) {
					versions = append(versions, v)
					if v == version {
						found = true
					}
				}
			}
		}
		switch {
		case len(versions) == 0:
			report(r.line, "%s (contrib): no ocb manifest's %ss has a module ending %s (%s)", m[1], kind, suffix, manifestList())
		case !found:
			report(r.line, "%s (contrib) says %s; the manifests have %s", m[1], version, strings.Join(versions, ", "))
		}
		for _, d := range dists {
			has := false
			for imp := range loaded[d][kind] {
				has = has || strings.HasSuffix(imp, suffix)
			}
			if !has {
				report(r.line, "%s (contrib): the table says %s, but %s has no such %s", m[1], d, manifests[d], kind)
			}
		}
	}
	return problems, nil
}

func manifestList() string {
	var l []string
	for _, rel := range manifests {
		l = append(l, rel)
	}
	sort.Strings(l)
	return strings.Join(l, ", ")
}

type tableRow struct {
	line  int
	cells []string
}

// componentRows reads the rows of the table under README.md's
// "## Components" heading, header and separator left out.
func componentRows(root, readme string) ([]tableRow, error) {
	data, err := os.ReadFile(filepath.Join(root, readme))
	if err != nil {
		return nil, err
	}
	var rows []tableRow
	in, header := false, 0
	s := bufio.NewScanner(bytes.NewReader(data))
	s.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for n := 1; s.Scan(); n++ {
		l := s.Text()
		if strings.HasPrefix(l, "#") {
			if in {
				break
			}
			in = strings.TrimSpace(strings.TrimLeft(l, "#")) == "Components"
			continue
		}
		if !in || !strings.HasPrefix(l, "|") {
			continue
		}
		if header < 2 { // the header and the |---| line
			header++
			continue
		}
		cells := strings.Split(strings.Trim(strings.TrimSpace(l), "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if len(cells) < 2 {
			return nil, fmt.Errorf("%s:%d: a Components row with fewer than two cells", readme, n)
		}
		rows = append(rows, tableRow{line: n, cells: cells})
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf(`%s: no "## Components" table`, readme)
	}
	return rows, nil
}
