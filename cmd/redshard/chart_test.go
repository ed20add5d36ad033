package main

import (
	"strings"
	"testing"
)

func TestTickLabel(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0, "0"},
		{-0.0, "0"},
		{5, "5"},
		{40, "40"},
		{250, "250"},
		{0.25, "0.25"},
		{0.1 + 0.2, "0.3"},
		{1000, "1k"},
		{2500, "2.5k"},
		{12000, "12k"},
		{12345, "12.3k"},
		{1.2e6, "1.2M"},
		{3e9, "3G"},
		{-2500, "-2.5k"},
	} {
		if got := tickLabel(tc.v); got != tc.want {
			t.Errorf("tickLabel(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

func TestCompactTicksHaveNoDecimalZeros(t *testing.T) {
	for _, r := range [][2]float64{{0, 5000}, {0, 12}, {0, 1.6e6}, {0, 0.07}, {0, 3.5}} {
		for _, tk := range (compactTicks{}).Ticks(r[0], r[1]) {
			if strings.HasSuffix(tk.Label, ".0") || strings.HasSuffix(tk.Label, ".00") || strings.Contains(tk.Label, "0000") {
				t.Errorf("range %v: tick %v labelled %q", r, tk.Value, tk.Label)
			}
		}
	}
}
