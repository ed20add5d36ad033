package main

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// table prints rows in aligned columns, two spaces apart. Columns are
// right-aligned (they mostly hold numbers) except the first and those that
// align marks with 'l' ("llr" left-aligns the first two).
type table struct {
	align string
	rows  [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer) {
	var widths []int
	for _, r := range t.rows {
		for i, c := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for _, r := range t.rows {
		b.Reset()
		for i, c := range r {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if i > 0 {
				b.WriteString("  ")
			}
			if i == 0 || (i < len(t.align) && t.align[i] == 'l') {
				b.WriteString(c)
				b.WriteString(pad)
			} else {
				b.WriteString(pad)
				b.WriteString(c)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// pct formats a fraction as a percentage with two decimals.
func pct(f float64) string { return fmt.Sprintf("%.2f%%", 100*f) }

// signedPct formats a fraction as a signed percentage.
func signedPct(f float64) string { return fmt.Sprintf("%+.2f%%", 100*f) }
