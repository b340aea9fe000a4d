package metadatatest // import "github.com/otelcol-gpu/otelcol-gpu/internal/metadatatest"

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// manifestGlobs are the repository's ocb manifests, relative to its root:
// the all-in-one binary and one per distribution.
var manifestGlobs = []string{"builder-config.yaml", "distributions/*/manifest.yaml"}

// manifest is the part of an ocb manifest that says what ships in it.
type manifest struct {
	Dist struct {
		Name string `yaml:"name"`
	} `yaml:"dist"`
	Receivers  []manifestEntry `yaml:"receivers"`
	Processors []manifestEntry `yaml:"processors"`
	Exporters  []manifestEntry `yaml:"exporters"`
	Connectors []manifestEntry `yaml:"connectors"`
	Extensions []manifestEntry `yaml:"extensions"`
}

type manifestEntry struct {
	GoMod  string `yaml:"gomod"`
	Import string `yaml:"import"`
}

// importPath is the entry's package: import, else gomod's module.
func (e manifestEntry) importPath() string {
	if e.Import != "" {
		return e.Import
	}
	path, _, _ := strings.Cut(e.GoMod, " ")
	return path
}

// readManifests parses the ocb manifests under root, by path.
func readManifests(root string) (map[string]manifest, error) {
	out := map[string]manifest{}
	for _, g := range manifestGlobs {
		paths, err := filepath.Glob(filepath.Join(root, g))
		if err != nil {
			return nil, err
		}
		for _, p := range paths {
			data, err := os.ReadFile(p)
			if err != nil {
				return nil, err
			}
			var m manifest
			if err := yaml.Unmarshal(data, &m); err != nil {
				return nil, fmt.Errorf("%s: %w", p, err)
			}
			out[p] = m
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no ocb manifest under %s", root)
	}
	return out, nil
}

// checkDistributions compares status.distributions with the manifests that
// list the component's package pkg, and checks they list it in its class's
// section.
func checkDistributions(md *metadata, pkg string, manifests map[string]manifest) problems {
	var ps problems
	shipped := []string{}
	for _, path := range keys(manifests) {
		m := manifests[path]
		sections := map[string][]manifestEntry{
			"receiver": m.Receivers, "processor": m.Processors, "exporter": m.Exporters,
			"connector": m.Connectors, "extension": m.Extensions,
		}
		for _, section := range keys(sections) {
			for _, e := range sections[section] {
				if e.importPath() != pkg {
					continue
				}
				if section != md.Status.Class {
					ps.addf("%s lists %s among its %ss, metadata.yaml's status.class is %s", path, pkg, section, md.Status.Class)
				}
				shipped = append(shipped, m.Dist.Name)
			}
		}
	}
	documented := append([]string{}, md.Status.Distributions...)
	slices.Sort(shipped)
	slices.Sort(documented)
	if !slices.Equal(documented, shipped) {
		ps.addf("status.distributions: metadata.yaml has %v, the ocb manifests ship %s in %v", documented, pkg, shipped)
	}
	return ps
}

// findModule returns the directory of the go.mod above the working
// directory and its module path.
func findModule() (root, module string, err error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", "", err
	}
	for {
		f, err := os.Open(filepath.Join(dir, "go.mod"))
		if err == nil {
			defer f.Close()
			s := bufio.NewScanner(f)
			for s.Scan() {
				if m, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module "); ok {
					return dir, strings.Trim(strings.TrimSpace(m), `"`), nil
				}
			}
			return "", "", fmt.Errorf("%s: no module line", f.Name())
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", "", err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}
