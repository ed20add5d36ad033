package feed

import (
	"slices"
	"testing"
)

func drain(f *Feed[int]) []int {
	out := make(chan int, 1000)
	var got []int
	for {
		send, v := f.Next(out)
		if send == nil {
			return got
		}
		send <- v
		f.Sent()
		got = append(got, <-out)
	}
}

func TestFeed(t *testing.T) {
	less := func(a, b int) bool { return a < b }
	tests := []struct {
		name   string
		offers []int
		want   []int
	}{
		{"in order", []int{1, 2, 3}, []int{1, 2, 3}},
		{"older and equal dropped", []int{2, 1, 2, 3, 3}, []int{2, 3}},
		{"zero is a value", []int{0, 1}, []int{0, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &Feed[int]{Less: less}
			for _, v := range tt.offers {
				f.Offer(v)
			}
			if got := drain(f); !slices.Equal(got, tt.want) {
				t.Fatalf("delivered %v, want %v", got, tt.want)
			}
		})
	}
	t.Run("a slow receiver skips to the newest", func(t *testing.T) {
		f := &Feed[int]{Less: less}
		for v := range maxPending + 10 {
			f.Offer(v)
		}
		got := drain(f)
		if len(got) != maxPending || got[0] != 10 || got[len(got)-1] != maxPending+9 {
			t.Fatalf("delivered %d values from %d to %d, want %d from 10 to %d", len(got), got[0], got[len(got)-1], maxPending, maxPending+9)
		}
		if f.Offer(5) {
			t.Fatal("an old value was queued after newer ones were delivered")
		}
	})
}
