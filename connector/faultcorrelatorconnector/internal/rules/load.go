package rules

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"

	"gopkg.in/yaml.v3"
)

//go:embed defaults.yaml
var defaultsYAML []byte

// File is the YAML document: a list of rules under "rules".
type File struct {
	Rules []Rule `yaml:"rules"`
}

// Default returns the rules that ship with the correlator
// (defaults.yaml): every rule of the operations documents' detection
// section and one rule per row of the XID table.
func Default() ([]Rule, error) {
	rs, err := parse(defaultsYAML)
	if err != nil {
		return nil, fmt.Errorf("rules: defaults.yaml: %w", err)
	}
	return rs, nil
}

// Load parses user rules and merges them onto defaults: a rule whose name
// matches a default replaces it whole (disabled: true switches it off), any
// other rule is added. Unknown fields, invalid values and duplicate names
// are errors that name the rule and field. The result keeps the defaults'
// order, then the added rules in file order.
func Load(data []byte, defaults []Rule) ([]Rule, error) {
	user, err := parse(data)
	if err != nil {
		return nil, err
	}
	index := make(map[string]int, len(defaults))
	out := make([]Rule, 0, len(defaults)+len(user))
	for _, r := range defaults {
		index[r.Name] = len(out)
		out = append(out, r)
	}
	for _, r := range user {
		if i, ok := index[r.Name]; ok {
			out[i] = r
			continue
		}
		index[r.Name] = len(out)
		out = append(out, r)
	}
	kept := out[:0]
	for _, r := range out {
		if !r.Disabled {
			kept = append(kept, r)
		}
	}
	return kept, nil
}

func parse(data []byte) ([]Rule, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true) // a misspelt field must not silently disable a check
	var f File
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("rules: parsing YAML: %w", err)
	}
	seen := make(map[string]bool, len(f.Rules))
	for i, r := range f.Rules {
		if err := r.Validate(); err != nil {
			return nil, fmt.Errorf("rules[%d]: %w", i, err)
		}
		if seen[r.Name] {
			return nil, fmt.Errorf("rules[%d]: rules: rule %q: field name: defined twice", i, r.Name)
		}
		seen[r.Name] = true
	}
	return f.Rules, nil
}
