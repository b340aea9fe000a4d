package frdump // import "github.com/otelcol-gpu/otelcol-gpu/receiver/ncclflightreceiver/internal/frdump"

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// What the mapper noticed without failing: unknown and missing fields,
// unparsable ranks, truncated frames, an unknown version (Warning).

func (p *parser) addUnknown(field string) {
	if p.unknown == nil {
		p.unknown = map[string]struct{}{}
	}
	p.unknown[field] = struct{}{}
}

func (p *parser) noteMissing(field string, seen bool) {
	if !seen && !slices.Contains(p.missingTop, field) {
		p.missingTop = append(p.missingTop, field)
	}
}

func (p *parser) warnings() []Warning {
	var ws []Warning
	v := p.dump.Version
	if p.versionSeen && (v.Less(Oldest) || Newest.Less(v)) {
		ws = append(ws, Warning{
			Kind:    WarnUnknownVersion,
			Fields:  []string{"version"},
			Message: fmt.Sprintf("frdump: version %q is not one of the known %s to %s: parsed the fields this version of the receiver knows", v.Raw, Oldest, Newest),
		})
	}

	missing := slices.Clone(p.missingTop)
	var details []string
	req := requiredEntryFields(v)
	for f := range numEntryFields {
		if n := p.missingEntry[f]; n > 0 && req&(1<<f) != 0 {
			name := "entries[]." + entryFieldNames[f]
			missing = append(missing, name)
			details = append(details, fmt.Sprintf("%s (in %d of %d entries)", name, n, p.entryCount))
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		slices.Sort(details)
		all := slices.DeleteFunc(slices.Clone(missing), func(s string) bool { return strings.HasPrefix(s, "entries[].") })
		all = append(all, details...)
		ws = append(ws, Warning{
			Kind:    WarnMissingFields,
			Fields:  missing,
			Message: fmt.Sprintf("frdump: version %s dump lacks fields, left at zero values: %s", versionText(v), strings.Join(all, ", ")),
		})
	}

	if len(p.unknown) > 0 {
		fields := make([]string, 0, len(p.unknown))
		for f := range p.unknown {
			fields = append(fields, f)
		}
		slices.Sort(fields)
		ws = append(ws, Warning{
			Kind:    WarnUnknownFields,
			Fields:  fields,
			Message: fmt.Sprintf("frdump: version %s dump has fields this receiver does not know, ignored: %s", versionText(v), strings.Join(fields, ", ")),
		})
	}

	if len(p.badRanks) > 0 {
		slices.Sort(p.badRanks)
		ws = append(ws, Warning{
			Kind:    WarnUnparsableRanks,
			Fields:  p.badRanks,
			Message: fmt.Sprintf("frdump: ranks are not a list of at most %d ranks, left empty: %s", p.opts.MaxRanksPerGroup, strings.Join(p.badRanks, ", ")),
		})
	}

	if p.truncatedFrames > 0 {
		ws = append(ws, Warning{
			Kind:    WarnTruncatedFrames,
			Fields:  []string{"entries[].frames"},
			Message: fmt.Sprintf("frdump: %d of %d entries have more than %d frames (MaxFramesPerEntry), kept the first %d", p.truncatedFrames, p.entryCount, p.opts.MaxFramesPerEntry, p.opts.MaxFramesPerEntry),
		})
	}
	return ws
}

func versionText(v Version) string {
	if v.Raw == "" {
		return "(none)"
	}
	return strconv.Quote(v.Raw)
}
