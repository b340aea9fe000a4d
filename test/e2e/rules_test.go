//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// runbookURLPrefix is where every alert's runbook_url must point: a file
// under docs/runbooks/ of this repository.
const runbookURLPrefix = "https://github.com/otelcol-gpu/otelcol-gpu/blob/main/"

// faultSeverityTemplate lets fault alerts take the correlator's severity.
const faultSeverityTemplate = "{{ $labels.fault_severity }}"

var severityPattern = regexp.MustCompile(`^P[1-4]$`)

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// TestPrometheusRules checks deploy/prometheus/rules.yaml with promtool
// (syntax and the unit tests in rules_test.yaml) and that every alert is
// routable and documented. Running every expression against the live e2e
// Prometheus is a later step.
func TestPrometheusRules(t *testing.T) {
	root := repoRoot(t)
	dir := filepath.Join(root, "deploy", "prometheus")
	promtool := lookPath(t, "promtool")

	for _, args := range [][]string{
		{"check", "rules", "rules.yaml"},
		{"test", "rules", "rules_test.yaml"},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	raw, err := os.ReadFile(filepath.Join(dir, "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.Unmarshal(raw, &rf); err != nil {
		t.Fatalf("parsing rules.yaml: %v", err)
	}
	alerts := 0
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts++
			if sev := r.Labels["severity"]; !severityPattern.MatchString(sev) && sev != faultSeverityTemplate {
				t.Errorf("alert %s: severity %q is not P1..P4", r.Alert, sev)
			}
			if r.Annotations["summary"] == "" {
				t.Errorf("alert %s: no summary annotation", r.Alert)
			}
			url := r.Annotations["runbook_url"]
			rel, ok := strings.CutPrefix(url, runbookURLPrefix)
			if !ok || !strings.HasPrefix(rel, "docs/runbooks/") {
				t.Errorf("alert %s: runbook_url %q is not under %sdocs/runbooks/", r.Alert, url, runbookURLPrefix)
				continue
			}
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel))); err != nil {
				t.Errorf("alert %s: runbook %s missing: %v", r.Alert, rel, err)
			}
		}
	}
	if alerts == 0 {
		t.Fatal("rules.yaml has no alerts")
	}
}
