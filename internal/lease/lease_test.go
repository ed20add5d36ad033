package lease

import (
	"testing"
	"time"
)

func TestLease(t *testing.T) {
	l := New(time.Second)
	if l.Fresh() || l.Remaining() != 0 {
		t.Fatal("a lease never renewed is fresh")
	}
	now := Now()
	l.Renew(now)
	if !l.FreshAt(now) || !l.FreshAt(now+int64(time.Second)) {
		t.Fatal("a lease is not fresh within its validity")
	}
	if l.FreshAt(now + int64(time.Second) + 1) {
		t.Fatal("a lease is fresh past its validity")
	}
	if r := l.Remaining(); r <= 0 || r > time.Second {
		t.Fatalf("Remaining = %v, want (0, 1s]", r)
	}
	l.Renew(now - int64(time.Hour)) // older: ignored
	if !l.FreshAt(now) {
		t.Fatal("an older renewal moved the lease backwards")
	}
	old := New(time.Millisecond)
	old.Renew(Now() - int64(time.Second))
	if old.Fresh() || old.Remaining() != 0 {
		t.Fatal("an expired lease is fresh")
	}
}

func TestNowMonotonic(t *testing.T) {
	a := Now()
	time.Sleep(time.Millisecond)
	if b := Now(); b <= a {
		t.Fatalf("Now went from %d to %d", a, b)
	}
}

func BenchmarkFresh(b *testing.B) {
	l := New(time.Hour)
	l.Renew(Now())
	b.ReportAllocs()
	for b.Loop() {
		if !l.Fresh() {
			b.Fatal("expired")
		}
	}
}
