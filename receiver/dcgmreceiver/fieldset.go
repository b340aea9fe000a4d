package dcgmreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver"

import (
	"fmt"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/counters"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/dcgmreceiver/internal/model"
)

// fieldSet is what one receiver reads and reports: the built-in catalogue,
// or the fields a dcgm-exporter counters CSV (`collectors`) lists.
type fieldSet struct {
	byID              map[model.FieldID]*model.Field
	device, profiling []model.FieldID
	// driverVersionLabel: under dcgm_exporter naming, the
	// DCGM_FI_DRIVER_VERSION label is on every series only when the CSV
	// lists it as a label, as dcgm-exporter does.
	driverVersionLabel bool
	// xidCount: under dcgm_exporter naming, DCGM_EXP_XID_ERRORS_COUNT is
	// reported only when the CSV lists it, as dcgm-exporter does.
	xidCount bool
}

// catalogueFields is the field set without a counters CSV.
var catalogueFields = func() *fieldSet {
	fs := &fieldSet{byID: make(map[model.FieldID]*model.Field, len(model.Catalogue)), driverVersionLabel: true, xidCount: true}
	for i := range model.Catalogue {
		fs.add(&model.Catalogue[i])
	}
	return fs
}()

func (fs *fieldSet) add(f *model.Field) {
	fs.byID[f.ID] = f
	switch {
	case f.Kind == model.Label:
	case f.Profiling:
		fs.profiling = append(fs.profiling, f.ID)
	default:
		fs.device = append(fs.device, f.ID)
	}
}

// newFieldSet reads the counters CSV at path; an empty path is the catalogue.
// dcgm-exporter's semantics: the CSV's type is the series' type and its help
// text the series' help under dcgm_exporter naming. Under otel naming a
// catalogued field keeps its semantic-convention metric (whose type is
// fixed), and a field outside the catalogue becomes gpu.dcgm.<name> with the
// CSV's type.
func newFieldSet(path, naming string) (*fieldSet, error) {
	if path == "" {
		return catalogueFields, nil
	}
	cs, err := counters.ParseFile(path)
	if err != nil {
		return nil, err
	}
	fs := &fieldSet{byID: make(map[model.FieldID]*model.Field, len(cs))}
	for _, c := range cs {
		if c.Exporter {
			fs.xidCount = true
			continue
		}
		if c.ID == model.FieldDriverVersion {
			fs.driverVersionLabel = c.Kind == model.Label
			if fs.driverVersionLabel {
				continue
			}
			return nil, fmt.Errorf("%s: DCGM_FI_DRIVER_VERSION is a string: list it as label", path)
		}
		var f model.Field
		if known, ok := model.FieldByID(c.ID); ok {
			f = *known
			if naming == NamingDCGMExporter {
				// The series is named as the CSV lists it, as
				// dcgm-exporter does (DCGM_FI_DEV_CLOCKS_EVENT_REASONS
				// as well as DCGM_FI_DEV_CLOCK_THROTTLE_REASONS).
				f.Name, f.Kind, f.Help = c.Name, c.Kind, c.Help
			}
		} else {
			f = model.Field{ID: c.ID, Name: c.Name, Kind: c.Kind, Help: c.Help, Profiling: model.IsProfilingID(c.ID),
				OTel: model.OTelNameOf(c.Name), Scale: 1}
		}
		fs.add(&f)
	}
	return fs, nil
}
