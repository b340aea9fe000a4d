package semconv

import (
	"slices"
	"strings"
)

// Prometheus is a second reader of every metric and label name: the
// gateway's remote-write exporter turns each character outside
// [A-Za-z0-9:] into "_", collapses runs of them, drops them at either end,
// and ends a counter's name in "_total" and a unit-1 gauge's in "_ratio".
// A name that is no hardware signal can thus reach Prometheus under a
// hardware signal's name: a script's gpu_ecc_errors counter would be
// gpu_ecc_errors_total there, the GPU receiver's series, which the shipped
// alert on double-bit errors reads; a script's host_name attribute would be
// the host_name label that the resource's host.name becomes.

// promSuffixes are what the exporter appends to a metric's name.
var promSuffixes = []string{"_total", "_ratio"}

// promBuf holds the Prometheus form PrometheusAlias builds: longer than
// every protected name's form, so a form that does not fit matches none.
type promBuf [128]byte

// promProtected are the Prometheus forms of the hardware signals and of
// the identity the provenance processor judges (host.name, gpu.uuid,
// gpu.index), with and without the exporter's suffixes.
var promProtected = func() map[string]struct{} {
	m := map[string]struct{}{}
	add := func(name string) {
		var buf promBuf
		n, ok := promForm(name, &buf)
		if !ok {
			panic("semconv: a protected name's Prometheus form does not fit promBuf: " + name)
		}
		form := string(buf[:n])
		m[form] = struct{}{}
		for _, s := range promSuffixes {
			m[strings.TrimSuffix(form, s)] = struct{}{}
		}
	}
	for name := range hardwareSignals {
		add(name)
	}
	add(AttrHostName)
	add(AttrGPUUUID)
	add(AttrGPUIndex)
	return m
}()

// promForm writes name's Prometheus form into buf: runs of characters
// outside [A-Za-z0-9] become one "_", none at either end (":" too, which
// labels may not hold). It returns false when the form would not fit.
func promForm(name string, buf *promBuf) (int, bool) {
	n, sep := 0, false
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			if sep && n > 0 {
				if n == len(buf) {
					return 0, false
				}
				buf[n] = '_'
				n++
			}
			sep = false
			if n == len(buf) {
				return 0, false
			}
			buf[n] = c
			n++
			continue
		}
		sep = true
	}
	return n, true
}

// promFirstTokens are the first tokens of the protected forms (gpu, hw,
// ib, nccl, host, DCGM): a name whose form starts otherwise is no alias,
// without a lookup.
var promFirstTokens = func() []string {
	out := []string{strings.TrimSuffix(DCGMExporterMetricPrefix, "_")}
	for form := range promProtected {
		tok, _, _ := strings.Cut(form, "_")
		if !slices.Contains(out, tok) {
			out = append(out, tok)
		}
	}
	slices.Sort(out)
	return out
}()

// PrometheusAlias reports whether name, a metric name or an attribute key,
// is neither a hardware signal nor host.name, gpu.uuid or gpu.index, yet
// Prometheus would store it under the name of one of them (its form, with
// or without "_total" or "_ratio", is one's, or starts with DCGM_). The
// provenance processor renames such names under forged., as it renames the
// hardware signals themselves. Unit suffixes ("_celsius") are not
// followed.
func PrometheusAlias(name string) bool {
	if name == "" {
		return false
	}
	// Every protected form starts with g, h, i, n or D: a name starting
	// with another letter or a digit has another form, without building it.
	switch c := name[0]; {
	case c == 'g' || c == 'h' || c == 'i' || c == 'n' || c == 'D':
	case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9':
		return false
	}
	var buf promBuf
	n, ok := promForm(name, &buf)
	if !ok || n == 0 {
		return false
	}
	form := buf[:n]
	first := form
	for i, c := range form {
		if c == '_' {
			first = form[:i]
			break
		}
	}
	known := false
	for _, tok := range promFirstTokens {
		if string(first) == tok {
			known = true
			break
		}
	}
	if !known || !promHit(form) {
		return false
	}
	// The protected names themselves are no aliases (rare: only a hit
	// gets here).
	return !HardwareSignal(name) && name != AttrHostName && name != AttrGPUUUID && name != AttrGPUIndex
}

// promHit: form is a protected form, with or without a suffix, or a DCGM
// exporter name.
func promHit(form []byte) bool {
	if _, hit := promProtected[string(form)]; hit {
		return true
	}
	for _, s := range promSuffixes {
		if len(form) > len(s) && string(form[len(form)-len(s):]) == s {
			if _, hit := promProtected[string(form[:len(form)-len(s)])]; hit {
				return true
			}
		}
	}
	p := DCGMExporterMetricPrefix
	return len(form) >= len(p) && string(form[:len(p)]) == p
}
