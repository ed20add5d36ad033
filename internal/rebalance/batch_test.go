package rebalance

import (
	"testing"
	"time"
)

// TestBatchSizer: without a budget every batch is the maximum; with one,
// batches start at FirstBoundedBatch, double (up to the maximum) while a
// batch takes less than a quarter of the budget, halve (down to 1) when
// one takes more than the budget, and stay otherwise.
func TestBatchSizer(t *testing.T) {
	free := NewBatchSizer(500, 0)
	free.Took(time.Hour)
	if n := free.Size(); n != 500 {
		t.Fatalf("no budget: batch of %d after a slow batch, want 500", n)
	}

	const budget = time.Second
	b := NewBatchSizer(100, budget)
	steps := []struct {
		took time.Duration
		want int
	}{
		{0, FirstBoundedBatch}, // the first batch
		{budget / 8, 32},       // fast: doubles
		{budget / 8, 64},       //
		{budget / 8, 100},      // capped at the maximum
		{budget / 2, 100},      // neither fast nor slow: stays
		{2 * budget, 50},       // slow: halves
		{2 * budget, 25},       //
		{budget, 25},           // exactly the budget: stays
		{budget / 4, 25},       // exactly a quarter: stays
	}
	for i, s := range steps {
		if i > 0 {
			b.Took(s.took)
		}
		if n := b.Size(); n != s.want {
			t.Fatalf("step %d (took %v): batch of %d, want %d", i, s.took, n, s.want)
		}
	}
	for range 10 {
		b.Took(2 * budget)
	}
	if n := b.Size(); n != 1 {
		t.Fatalf("after slow batches: batch of %d, want 1", n)
	}
	if n := NewBatchSizer(8, budget).Size(); n != 8 {
		t.Fatalf("a maximum under the first batch: batch of %d, want 8", n)
	}
}
