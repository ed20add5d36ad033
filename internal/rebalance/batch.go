package rebalance

import "time"

// BatchSizer sizes the batches of one source's drain. In a fleet process
// every batch must end within the process's lease, or all of its keys
// still moving fail: so with a budget (a quarter lease) batches start
// small (FirstBoundedBatch) and double while a batch takes less than a
// quarter of the budget, and halve when one takes more than the budget; a
// slow server or large values slow the drain down rather than fail it.
// Without a budget there is no such bound and every batch is the maximum.
// A BatchSizer is used by one goroutine.
type BatchSizer struct {
	n, max int
	budget time.Duration // 0: no bound
}

// FirstBoundedBatch is the first batch of a drain with a budget.
const FirstBoundedBatch = 16

// NewBatchSizer returns the sizer of a drain whose batches hold at most
// max keys and should take at most budget (0: no bound).
func NewBatchSizer(max int, budget time.Duration) *BatchSizer {
	if budget == 0 {
		return &BatchSizer{n: max, max: max}
	}
	return &BatchSizer{n: min(max, FirstBoundedBatch), max: max, budget: budget}
}

// Size is the number of keys of the next batch.
func (b *BatchSizer) Size() int { return b.n }

// Took records how long the last batch took.
func (b *BatchSizer) Took(d time.Duration) {
	switch {
	case b.budget == 0:
	case d > b.budget:
		b.n = max(1, b.n/2)
	case d < b.budget/4:
		b.n = min(b.max, b.n*2)
	}
}
