// Package counters reads dcgm-exporter's counters CSV, the file users
// already maintain to choose fields (dcgm-exporter's -f /
// DCGM_EXPORTER_COLLECTORS), with dcgm-exporter's semantics: one line per
// field, `DCGM field name, gauge|counter|label, help text`; lines starting
// with # are comments. Any DCGM field name of go-dcgm's table is accepted,
// not only the receiver's built-in catalogue; and, beyond dcgm-exporter, a
// field id as a number (1600) or DCGM_FI_<id> (DCGM_FI_1600), for fields
// newer than the table: the series is named by the table's name of that id
// if it has one, else DCGM_FI_<id>.
package counters // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/counters"

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

// Counter is one line of the file.
type Counter struct {
	// Name is the DCGM field name, e.g. DCGM_FI_DEV_FAN_SPEED, as listed;
	// for a field listed by id, go-dcgm's name of it, else DCGM_FI_<id>.
	Name string
	ID   model.FieldID
	// Kind is the file's type column: the Prometheus type under
	// `naming: dcgm_exporter`; a label's value is put on every series of
	// the GPU, named by the field.
	Kind model.Kind
	Help string
	// Exporter marks DCGM_EXP_XID_ERRORS_COUNT, a series dcgm-exporter
	// computes (the count of each XID) rather than a DCGM field; ID is 0.
	Exporter bool
}

// ExporterXIDCount is the one series dcgm-exporter computes that the
// receiver computes too (the count of each XID); its other DCGM_EXP_* names
// are refused by name.
const ExporterXIDCount = "DCGM_EXP_XID_ERRORS_COUNT"

// labelFields are the label-type fields the receiver can put on series: the
// values it knows with each GPU's identity. Other string fields are not read
// as values by any source.
var labelFields = map[string]bool{"DCGM_FI_DRIVER_VERSION": true}

// maxFileSize bounds what is read: dcgm-exporter's full list of fields is
// under 64 KiB, and a config must not make the agent read a huge file.
const maxFileSize = 1 << 20

// ParseFile reads a counters CSV; errors name the file, line and column.
func ParseFile(path string) ([]Counter, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("counters CSV: %w", err)
	}
	defer f.Close()
	return Parse(path, f)
}

// isTableName reports whether name is a field name of go-dcgm's table.
func isTableName(name string) bool {
	id, ok := model.FieldIDByName(name)
	return ok && name != model.NumericFieldName(id)
}

// Parse reads a counters CSV from r; name is the file's name in errors.
func Parse(name string, r io.Reader) ([]Counter, error) {
	lr := &io.LimitedReader{R: r, N: maxFileSize + 1}
	cr := csv.NewReader(lr)
	cr.Comment = '#'
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	cr.ReuseRecord = true
	var (
		out  []Counter
		errs []error
		seen = map[model.FieldID]int{}
	)
	fail := func(field int, format string, args ...any) {
		line, col := cr.FieldPos(field)
		errs = append(errs, fmt.Errorf("%s:%d:%d: %s", name, line, col, fmt.Sprintf(format, args...)))
	}
	for len(errs) < 10 {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if lr.N <= 0 {
			return nil, fmt.Errorf("%s: larger than %d bytes; a counters CSV lists at most a few hundred fields", name, maxFileSize)
		}
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			errs = append(errs, fmt.Errorf("%s:%d:%d: %w", name, pe.Line, pe.Column, pe.Err))
			break // encoding/csv cannot resume after a syntax error
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		if len(rec) != 3 {
			fail(0, "want 3 columns (DCGM field, gauge|counter|label, help text), got %d", len(rec))
			continue
		}
		field := strings.TrimSpace(rec[0])
		kindText := strings.TrimSpace(rec[1])
		var kind model.Kind
		switch kindText {
		case "gauge":
			kind = model.Gauge
		case "counter":
			kind = model.Counter
		case "label":
			kind = model.Label
		default:
			fail(1, "type %q of %s is not one of gauge, counter, label", kindText, field)
			continue
		}
		if field == ExporterXIDCount {
			if kind == model.Label {
				fail(1, "%s is a count: list it as gauge or counter", field)
				continue
			}
			out = append(out, Counter{Name: field, Kind: kind, Help: strings.TrimSpace(rec[2]), Exporter: true})
			continue
		}
		if strings.HasPrefix(field, "DCGM_EXP_") {
			fail(0, "%s is computed by dcgm-exporter, not a DCGM field; of those the receiver computes only %s", field, ExporterXIDCount)
			continue
		}
		id, ok := model.FieldIDByName(field)
		if numeric, isNum := model.ParseFieldID(field); isNum {
			id, ok = numeric, true
		} else if !ok && field != "" && field[0] >= '0' && field[0] <= '9' {
			fail(0, "%q is not a DCGM field id (a number from 1 to 65535, no leading zeros)", field)
			continue
		}
		if !ok {
			fail(0, "%q is not a DCGM field name (see dcgm_fields.h, e.g. DCGM_FI_DEV_FAN_SPEED) or id", field)
			continue
		}
		if _, named := model.FieldByName(field); !named && !isTableName(field) {
			// A number, or DCGM_FI_<number>: the table's name when it
			// has one, so that a field has one series name.
			field = model.FieldNameOf(id)
		}
		if kind == model.Label && !labelFields[field] {
			fail(1, "%s: type label is supported only for DCGM_FI_DRIVER_VERSION; list it as gauge or counter", field)
			continue
		}
		if prev, dup := seen[id]; dup {
			fail(0, "%s listed again (first on line %d)", field, prev)
			continue
		}
		line, _ := cr.FieldPos(0)
		seen[id] = line
		out = append(out, Counter{Name: field, ID: id, Kind: kind, Help: strings.TrimSpace(rec[2])})
	}
	if lr.N <= 0 {
		return nil, fmt.Errorf("%s: larger than %d bytes; a counters CSV lists at most a few hundred fields", name, maxFileSize)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: lists no fields", name)
	}
	return out, nil
}
