package analysis

import (
	"sort"
	"strconv"
	"strings"
)

// The messages follow fr_trace's wording, which prints Python values: rank
// sets as {0, 1}, sizes as [[3, 4]], dtypes as ['Float'].

// rankSet renders ranks as a Python set: {0, 1, 3}.
func rankSet(ranks []int) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, r := range ranks {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(r))
	}
	b.WriteByte('}')
	return b.String()
}

// pySizes renders sizes as a Python list of lists: [[3, 4]].
func pySizes(sizes [][]int64) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, s := range sizes {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('[')
		for j, n := range s {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString(strconv.FormatInt(n, 10))
		}
		b.WriteByte(']')
	}
	b.WriteByte(']')
	return b.String()
}

// pyStrings renders strings as a Python list: ['Float'].
func pyStrings(ss []string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, s := range ss {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("'" + s + "'")
	}
	b.WriteByte(']')
	return b.String()
}

// groupInfo is fr_trace's "group info" value: name:desc.
func groupInfo(name, desc string) string {
	if desc == "" {
		return name
	}
	return name + ":" + desc
}

// byValue renders one value per rank, ranks that agree together, the most
// common value first: "ranks {0, 1, 3}: 19; rank 2: 16".
func byValue(ranks []int, values []string) string {
	type bucket struct {
		value string
		ranks []int
	}
	var buckets []*bucket
	seen := map[string]*bucket{}
	for i, r := range ranks {
		b := seen[values[i]]
		if b == nil {
			b = &bucket{value: values[i]}
			seen[values[i]] = b
			buckets = append(buckets, b)
		}
		b.ranks = append(b.ranks, r)
	}
	sort.SliceStable(buckets, func(i, j int) bool { return len(buckets[i].ranks) > len(buckets[j].ranks) })
	parts := make([]string, len(buckets))
	for i, b := range buckets {
		if len(b.ranks) == 1 {
			parts[i] = "rank " + strconv.Itoa(b.ranks[0]) + ": " + b.value
		} else {
			parts[i] = "ranks " + rankSet(b.ranks) + ": " + b.value
		}
	}
	return strings.Join(parts, "; ")
}

// seqRanges renders ascending sequence numbers as ranges: "18-19, 23".
func seqRanges(seqs []int64) string {
	var parts []string
	for i := 0; i < len(seqs); {
		j := i
		for j+1 < len(seqs) && seqs[j+1] == seqs[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.FormatInt(seqs[i], 10))
		} else {
			parts = append(parts, strconv.FormatInt(seqs[i], 10)+"-"+strconv.FormatInt(seqs[j], 10))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

// ms renders nanoseconds as milliseconds with three decimals.
func ms(ns float64) string { return strconv.FormatFloat(ns/1e6, 'f', 3, 64) }

func rankKey(rank int, field string) string {
	return "rank." + strconv.Itoa(rank) + "." + field
}
