package dcgmreceiver

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

// buildOne builds the metrics of one snapshot with the field set of csv.
func buildOne(t *testing.T, csv, naming string, values ...model.Value) (*fieldSet, func(name string) bool) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.csv")
	require.NoError(t, os.WriteFile(path, []byte(csv), 0o600))
	fs, err := newFieldSet(path, naming)
	require.NoError(t, err)
	b := newMetricsBuilder(naming, "xl003", "test", pcommon.NewTimestampFromTime(time.Unix(1_789_000_000, 0)))
	b.fields = fs
	md := b.build(snapshot(time.Unix(1_790_000_000, 0), values...), func(model.GPUSample) model.Owner { return model.Owner{} }, nil)
	return fs, func(name string) bool { _, ok := findPoint(md, name, nil); return ok }
}

// Every field of go-dcgm's table, not only the catalogue's 61, is read and
// reported under the name the CSV lists it by.
func TestCollectorsAnyFieldOfTheTable(t *testing.T) {
	n := 0
	for _, name := range model.DCGMFieldNames() {
		if name == "DCGM_FI_DRIVER_VERSION" {
			continue // a label, tested with the catalogue
		}
		id, _ := model.FieldIDByName(name)
		fs, has := buildOne(t, name+", gauge, h\n", NamingDCGMExporter, intValue(id, 7))
		wantProfiling := model.IsProfilingID(id)
		if f, ok := model.FieldByID(id); ok {
			wantProfiling = f.Profiling
		}
		if wantProfiling {
			assert.Equal(t, []model.FieldID{id}, fs.profiling, name)
		} else {
			assert.Equal(t, []model.FieldID{id}, fs.device, name)
		}
		assert.True(t, has(name), "%s (id %d) is reported under its name", name, id)
		n++
	}
	assert.Greater(t, n, 500)
}

// A field newer than go-dcgm's table, listed by its number.
func TestCollectorsFieldByNumber(t *testing.T) {
	const csv = "1600, counter, A field newer than the table.\n191, gauge, Fan.\n"
	fs, has := buildOne(t, csv, NamingDCGMExporter, intValue(1600, 3), intValue(191, 40))
	assert.Equal(t, []model.FieldID{191, 1600}, sorted(fs.device))
	assert.True(t, has("DCGM_FI_1600"))
	assert.True(t, has("DCGM_FI_DEV_FAN_SPEED"), "a number go-dcgm knows is named by go-dcgm's name")
	_, has = buildOne(t, csv, NamingOTel, intValue(1600, 3), intValue(191, 40))
	assert.True(t, has("gpu.dcgm.1600"))
	assert.True(t, has("gpu.dcgm.dev_fan_speed"))
}

// Without a counters CSV, the help text of every catalogued series is
// dcgm-exporter's, as two real dcgm-exporter pages print them (test/e2e
// testdata): dashboards and humans reading # HELP see no difference.
func TestCatalogueHelpTextsAreDCGMExporters(t *testing.T) {
	pages, err := filepath.Glob(filepath.Join("..", "..", "test", "e2e", "testdata", "*dcgm-exporter-metrics.prom"))
	require.NoError(t, err)
	require.NotEmpty(t, pages)
	compared := 0
	for _, page := range pages {
		f, err := os.Open(page)
		require.NoError(t, err)
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			rest, ok := strings.CutPrefix(sc.Text(), "# HELP ")
			if !ok {
				continue
			}
			name, help, _ := strings.Cut(rest, " ")
			field, ok := model.FieldByName(name)
			if !ok {
				continue
			}
			assert.Equal(t, help, field.Help, "help text of %s (%s)", name, filepath.Base(page))
			compared++
		}
		require.NoError(t, sc.Err())
		f.Close()
	}
	assert.Greater(t, compared, 20)
}
