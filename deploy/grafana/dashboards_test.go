package grafana

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The three dashboards of the README, and no other.
var wantFiles = []string{"cluster-gpu-health.json", "fault-timeline.json", "job-steps.json"}

func TestDashboardsParseWithIdentity(t *testing.T) {
	ds, err := Load()
	require.NoError(t, err)
	var files []string
	uids := map[string]string{}
	for _, d := range ds {
		files = append(files, d.File)
		require.NotEmpty(t, d.UID, d.File)
		require.NotEmpty(t, d.Title, d.File)
		// Grafana 11 and 12 load schema 39 without migrating it.
		require.GreaterOrEqual(t, d.SchemaVersion, 39, d.File)
		require.LessOrEqual(t, len(d.UID), 40, "%s: Grafana limits uids to 40 characters", d.File)
		if other, dup := uids[d.UID]; dup {
			t.Errorf("%s and %s share uid %s", d.File, other, d.UID)
		}
		uids[d.UID] = d.File
		require.NotEmpty(t, d.AllPanels(), d.File)
	}
	require.Equal(t, wantFiles, files)
}

// Every dashboard declares the three datasource variables, and every panel,
// target and annotation uses one of them (never a fixed datasource uid), of
// the matching type.
func TestDashboardsUseDatasourceVariables(t *testing.T) {
	ds, err := Load()
	require.NoError(t, err)
	for _, d := range ds {
		declared := map[string]string{}
		for _, v := range d.Templating.List {
			if v.Type == "datasource" {
				declared["${"+v.Name+"}"] = strings.Trim(string(v.Query), `"`)
			}
		}
		for typ, uid := range DatasourceVariables {
			require.Equal(t, typ, declared[uid], "%s: datasource variable %s of type %s", d.File, uid, typ)
		}
		for _, p := range d.AllPanels() {
			where := d.File + ": panel " + p.Title
			checkRef(t, where, p.Datasource)
			require.NotEmpty(t, p.Targets, where)
			for _, tg := range p.Targets {
				if tg.Datasource != nil {
					checkRef(t, where+" / "+tg.RefID, tg.Datasource)
					require.Equal(t, p.Datasource.UID, tg.Datasource.UID, "%s: target %s uses another datasource than its panel", where, tg.RefID)
				}
			}
			require.LessOrEqual(t, p.GridPos.X+p.GridPos.W, 24, "%s: wider than the grid", where)
			require.Positive(t, p.GridPos.H, where)
		}
		for _, a := range d.Annotations.List {
			if a.BuiltIn == 1 {
				continue
			}
			checkRef(t, d.File+": annotation "+a.Name, a.Datasource)
		}
	}
}

func checkRef(t *testing.T, where string, ref *DatasourceRef) {
	t.Helper()
	require.NotNil(t, ref, "%s: no datasource", where)
	want, ok := DatasourceVariables[ref.Type]
	require.True(t, ok, "%s: datasource type %q is not prometheus, loki or tempo", where, ref.Type)
	require.Equal(t, want, ref.UID, "%s: a %s datasource must be %s", where, ref.Type, want)
}

// Grafana's own variables, and those every dashboard declares.
var builtinVariables = map[string]bool{
	"__rate_interval": true, "__interval": true, "__range": true, "__auto": true,
	"__from": true, "__to": true, "__all": true,
}

var variableRef = regexp.MustCompile(`\$\{?(\w+)`)

// Every query is non-empty, and every variable it uses is declared.
func TestDashboardQueriesNonEmptyAndDeclared(t *testing.T) {
	ds, err := Load()
	require.NoError(t, err)
	byType := map[string]int{}
	for _, d := range ds {
		declared := map[string]bool{}
		for _, v := range d.Templating.List {
			declared[v.Name] = true
		}
		qs := d.Queries()
		require.NotEmpty(t, qs, d.File)
		for _, q := range qs {
			where := q.Dashboard + ": " + q.Where
			require.NotEmpty(t, strings.TrimSpace(q.Text), "%s: empty %s query", where, q.Type)
			byType[q.Type]++
			for _, m := range variableRef.FindAllStringSubmatch(q.Text, -1) {
				if !builtinVariables[m[1]] && !declared[m[1]] {
					t.Errorf("%s: variable $%s is not declared", where, m[1])
				}
			}
			if q.Type == "loki" {
				// A Loki query needs a stream selector with a non-empty matcher.
				require.Contains(t, q.Text, `{service_name=~".+"}`, where)
			}
		}
	}
	// Each backend is used somewhere: dashboards of Prometheus only would
	// not show faults (Loki) or steps (Tempo).
	for _, typ := range []string{"prometheus", "loki", "tempo"} {
		require.Positive(t, byType[typ], "no %s query in any dashboard", typ)
	}
}

func TestParseRejectsBadJSON(t *testing.T) {
	_, err := Parse([]byte(`{"uid": "x", "panels": [`))
	require.Error(t, err)
	d, err := Parse([]byte(`{"uid":"x","title":"t","panels":[{"type":"row","panels":[{"type":"stat","title":"in row","targets":[{"refId":"A","expr":"up"}],"datasource":{"type":"prometheus","uid":"${prometheus}"}}]}]}`))
	require.NoError(t, err)
	ps := d.AllPanels()
	require.Len(t, ps, 1)
	require.Equal(t, "in row", ps[0].Title)
	qs := d.Queries()
	require.Len(t, qs, 1)
	require.Equal(t, Query{Where: "in row / A", Type: "prometheus", Text: "up"}, qs[0])
}
