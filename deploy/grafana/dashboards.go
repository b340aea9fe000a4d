// Package grafana holds the otelcol-gpu Grafana dashboards (dashboards/*.json,
// embedded) and reads their queries, so that tests can check them: the unit
// tests here check their structure, test/e2e runs every PromQL query against
// the pipeline's Prometheus.
package grafana

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
)

//go:embed dashboards/*.json
var files embed.FS

// Datasource variables every panel and annotation must use, by plugin type.
var DatasourceVariables = map[string]string{
	"prometheus": "${prometheus}",
	"loki":       "${loki}",
	"tempo":      "${tempo}",
}

// DatasourceRef is a panel's, target's or annotation's datasource.
type DatasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// Target is one query of a panel or annotation. Prometheus and Loki put the
// query in expr, Tempo in query.
type Target struct {
	RefID      string         `json:"refId"`
	Datasource *DatasourceRef `json:"datasource"`
	Expr       string         `json:"expr"`
	Query      string         `json:"query"`
	Format     string         `json:"format"`
}

// Panel is a dashboard panel; rows hold their collapsed panels.
type Panel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource *DatasourceRef `json:"datasource"`
	Targets    []Target       `json:"targets"`
	Panels     []Panel        `json:"panels"`
	GridPos    struct {
		X int `json:"x"`
		Y int `json:"y"`
		W int `json:"w"`
		H int `json:"h"`
	} `json:"gridPos"`
}

// Annotation is an entry of annotations.list.
type Annotation struct {
	Name       string         `json:"name"`
	BuiltIn    int            `json:"builtIn"`
	Datasource *DatasourceRef `json:"datasource"`
	Target     *Target        `json:"target"`
	Expr       string         `json:"expr"`
}

// Variable is a template variable.
type Variable struct {
	Name  string          `json:"name"`
	Type  string          `json:"type"`
	Query json.RawMessage `json:"query"`
}

// Dashboard is the part of a dashboard's JSON model the tests read.
type Dashboard struct {
	File          string  `json:"-"`
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []Panel `json:"panels"`
	Templating    struct {
		List []Variable `json:"list"`
	} `json:"templating"`
	Annotations struct {
		List []Annotation `json:"list"`
	} `json:"annotations"`
}

// Query is one query of a dashboard, with where it comes from.
type Query struct {
	Dashboard string // file name
	Where     string // panel title and refId, or "annotation <name>"
	Type      string // datasource type: prometheus, loki, tempo
	Text      string // PromQL, LogQL or TraceQL
	Format    string // Prometheus target format (time_series, table, heatmap)
}

// Load parses every embedded dashboard, in file name order.
func Load() ([]Dashboard, error) {
	names, err := fs.Glob(files, "dashboards/*.json")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	out := make([]Dashboard, 0, len(names))
	for _, name := range names {
		raw, err := files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		d, err := Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		d.File = path.Base(name)
		out = append(out, d)
	}
	return out, nil
}

// Parse reads one dashboard's JSON model.
func Parse(raw []byte) (Dashboard, error) {
	var d Dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		return Dashboard{}, err
	}
	return d, nil
}

// AllPanels returns the panels, those inside rows included, rows excluded.
func (d Dashboard) AllPanels() []Panel {
	var out []Panel
	var walk func([]Panel)
	walk = func(ps []Panel) {
		for _, p := range ps {
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			out = append(out, p)
		}
	}
	walk(d.Panels)
	return out
}

// Queries returns every query of the dashboard's panels and annotations.
// A target without a datasource of its own uses its panel's.
func (d Dashboard) Queries() []Query {
	var out []Query
	for _, p := range d.AllPanels() {
		for _, t := range p.Targets {
			ds := p.Datasource
			if t.Datasource != nil {
				ds = t.Datasource
			}
			out = append(out, Query{Dashboard: d.File, Where: p.Title + " / " + t.RefID, Type: dsType(ds), Text: t.text(), Format: t.Format})
		}
	}
	for _, a := range d.Annotations.List {
		if a.BuiltIn == 1 {
			continue
		}
		text := a.Expr
		if a.Target != nil && a.Target.text() != "" {
			text = a.Target.text()
		}
		out = append(out, Query{Dashboard: d.File, Where: "annotation " + a.Name, Type: dsType(a.Datasource), Text: text})
	}
	return out
}

func (t Target) text() string {
	if t.Expr != "" {
		return t.Expr
	}
	return t.Query
}

func dsType(ds *DatasourceRef) string {
	if ds == nil {
		return ""
	}
	return strings.ToLower(ds.Type)
}
