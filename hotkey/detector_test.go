package hotkey_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redshard/redshard/hotkey"
)

func mustNew(t testing.TB, cfg *hotkey.Config) *hotkey.Detector {
	t.Helper()
	d, err := hotkey.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return d
}

func TestNewValidation(t *testing.T) {
	tests := []struct {
		name string
		cfg  *hotkey.Config
		ok   bool
	}{
		{"nil config", nil, true},
		{"zero config", &hotkey.Config{}, true},
		{"all set", &hotkey.Config{Window: time.Second, MinRate: 5, MinShare: 1, Capacity: 1, Hysteresis: 1}, true},
		{"negative window", &hotkey.Config{Window: -time.Second}, false},
		{"negative rate", &hotkey.Config{MinRate: -1}, false},
		{"NaN rate", &hotkey.Config{MinRate: math.NaN()}, false},
		{"infinite rate", &hotkey.Config{MinRate: math.Inf(1)}, false},
		{"negative share", &hotkey.Config{MinShare: -0.1}, false},
		{"share above 1", &hotkey.Config{MinShare: 1.5}, false},
		{"NaN share", &hotkey.Config{MinShare: math.NaN()}, false},
		{"negative capacity", &hotkey.Config{Capacity: -1}, false},
		{"huge capacity", &hotkey.Config{Capacity: hotkey.MaxCapacity + 1}, false},
		{"negative hysteresis", &hotkey.Config{Hysteresis: -0.5}, false},
		{"hysteresis above 1", &hotkey.Config{Hysteresis: 2}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := hotkey.New(tt.cfg)
			if tt.ok {
				if err != nil || d == nil {
					t.Fatalf("New = %v, %v; want a detector", d, err)
				}
				return
			}
			if !errors.Is(err, hotkey.ErrInvalidConfig) || d != nil {
				t.Fatalf("New = %v, %v; want ErrInvalidConfig", d, err)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	d := mustNew(t, nil)
	c := d.Effective()
	if c.Window != hotkey.DefaultWindow || c.MinRate != hotkey.DefaultMinRate ||
		c.MinShare != hotkey.DefaultMinShare || c.Capacity != hotkey.DefaultCapacity ||
		c.Hysteresis != hotkey.DefaultHysteresis || c.Now == nil {
		t.Fatalf("defaults not applied: %+v", c)
	}
	if got := d.Shards(); got != 32 {
		t.Errorf("shards = %d, want 32", got)
	}
}

func TestNilDetector(t *testing.T) {
	var d *hotkey.Detector
	d.Observe("k")
	d.Reset()
	if d.IsHot("k") || d.Top(3) != nil {
		t.Fatal("nil detector must be inert")
	}
}

func TestTopOrderAndRate(t *testing.T) {
	clk := newFakeClock()
	d := mustNew(t, &hotkey.Config{Window: 10 * time.Second, Now: clk.Now})
	// 50s at 1ms steps: a at 600/s, b at 300/s, c at 50/s.
	for i := range 50_000 {
		clk.Advance(time.Millisecond)
		if i%5 < 3 {
			d.Observe("a")
		}
		if i%10 < 3 {
			d.Observe("b")
		}
		if i%20 == 19 {
			d.Observe("c")
		}
	}
	if got := d.Top(0); got != nil {
		t.Errorf("Top(0) = %v, want nil", got)
	}
	top := d.Top(10)
	if len(top) != 3 {
		t.Fatalf("Top(10) = %v, want 3 keys", top)
	}
	want := []struct {
		key  string
		rate float64
		hot  bool
	}{{"a", 600, true}, {"b", 300, true}, {"c", 50, false}}
	for i, w := range want {
		k := top[i]
		if k.Key != w.key || math.Abs(k.Rate-w.rate) > 0.05*w.rate || k.Hot != w.hot {
			t.Errorf("Top[%d] = %+v, want %s ≈ %v/s hot=%v", i, k, w.key, w.rate, w.hot)
		}
		if d.IsHot(k.Key) != k.Hot {
			t.Errorf("IsHot(%s) = %v disagrees with Top", k.Key, !k.Hot)
		}
	}
	if top2 := d.Top(2); len(top2) != 2 || top2[0].Key != "a" || top2[1].Key != "b" {
		t.Errorf("Top(2) = %v", top2)
	}
}

func TestReset(t *testing.T) {
	clk := newFakeClock()
	d := mustNew(t, &hotkey.Config{Window: time.Second, Now: clk.Now})
	for range 10_000 {
		clk.Advance(100 * time.Microsecond)
		d.Observe("k")
	}
	if !d.IsHot("k") {
		t.Fatal("k should be hot before Reset")
	}
	d.Reset()
	if d.IsHot("k") || len(d.Top(10)) != 0 || d.Tracked() != 0 {
		t.Fatal("Reset must forget everything")
	}
	for range 10_000 {
		clk.Advance(100 * time.Microsecond)
		d.Observe("k")
	}
	if !d.IsHot("k") {
		t.Fatal("k should turn hot again after Reset")
	}
}

// stream drives a detector with a celebrity key taking a share of a
// background of many keys, at a fixed total rate on a fake clock.
type stream struct {
	d     *hotkey.Detector
	clk   *fakeClock
	step  time.Duration
	bg    []string
	rng   *rand.Rand
	celeb string
	share float64
	acc   float64
}

func newStream(d *hotkey.Detector, clk *fakeClock, step time.Duration, nbg int) *stream {
	s := &stream{d: d, clk: clk, step: step, rng: rand.New(rand.NewPCG(7, 8)), celeb: "celebrity"}
	for i := range nbg {
		s.bg = append(s.bg, "bg:"+strconv.Itoa(i))
	}
	return s
}

// run emits n observations; the celebrity gets exactly s.share of them.
func (s *stream) run(n int) {
	for range n {
		s.clk.Advance(s.step)
		s.acc += s.share
		if s.acc >= 1 {
			s.acc--
			s.d.Observe(s.celeb)
		} else {
			s.d.Observe(s.bg[s.rng.IntN(len(s.bg))])
		}
	}
}

func TestCooling(t *testing.T) {
	const window = time.Second
	const step = 10 * time.Microsecond // 100k observations/s
	perWindow := int(window / step)
	tests := []struct {
		name       string
		background bool
		after      float64 // windows of silence from the celebrity
		wantHot    bool
	}{
		// A key at 20% falls below half of MinShare after
		// tau×ln(0.2/0.005) ≈ 1.84 windows while the rest goes on.
		{"traffic goes on, shortly after", true, 0.2, true},
		{"traffic goes on, past the window", true, 2.5, false},
		// With no traffic at all only the rate decays: 20000/s to 50/s
		// takes tau×ln(400) ≈ 3 windows. Top refreshes the hot set.
		{"no traffic, past the window", false, 4, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newFakeClock()
			d := mustNew(t, &hotkey.Config{Window: window, Now: clk.Now})
			s := newStream(d, clk, step, 100_000)
			s.share = 0.2
			s.run(2 * perWindow)
			if !d.IsHot(s.celeb) {
				t.Fatal("celebrity at 20% is not hot")
			}
			s.share = 0
			silence := time.Duration(tt.after * float64(window))
			if tt.background {
				s.run(int(silence / step))
			} else {
				clk.Advance(silence)
				d.Top(1)
			}
			if got := d.IsHot(s.celeb); got != tt.wantHot {
				t.Fatalf("IsHot after %.1f windows = %v, want %v", tt.after, got, tt.wantHot)
			}
		})
	}
}

func TestHysteresis(t *testing.T) {
	const window = 10 * time.Second // tau = 5s
	tests := []struct {
		name               string
		hysteresis         float64
		warm               float64 // rate for two windows first
		lo, hi             float64 // then alternate lo and hi every tau
		warmHot            bool
		minFlips, maxFlips int
	}{
		// The decayed rate of a 60/140 square wave swings over ≈82..118:
		// it crosses MinRate twice per cycle but never half of it.
		{"hot key wobbling around MinRate stays hot", 0.5, 300, 60, 140, true, 0, 0},
		{"without hysteresis the same key flaps", 1, 300, 60, 140, true, 4, 1 << 30},
		{"cold key wobbling below MinRate stays cold", 0.5, 0, 40, 90, false, 0, 0},
		{"hot key falling below half of MinRate cools once", 0.5, 300, 20, 30, true, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newFakeClock()
			d := mustNew(t, &hotkey.Config{
				Window: window, MinRate: 100, MinShare: 1e-9, Hysteresis: tt.hysteresis, Now: clk.Now,
			})
			var acc float64
			emit := func(rate float64, dur time.Duration) (flips int) {
				last := d.IsHot("k")
				for range int(dur / time.Millisecond) {
					clk.Advance(time.Millisecond)
					for acc += rate / 1000; acc >= 1; acc-- {
						d.Observe("k")
					}
					if h := d.IsHot("k"); h != last {
						flips++
						last = h
					}
				}
				return flips
			}
			emit(tt.warm, 2*window)
			if got := d.IsHot("k"); got != tt.warmHot {
				t.Fatalf("after warm-up IsHot = %v, want %v", got, tt.warmHot)
			}
			flips := 0
			for range 10 {
				flips += emit(tt.lo, window/2)
				flips += emit(tt.hi, window/2)
			}
			t.Logf("%d transitions over 10 cycles", flips)
			if flips < tt.minFlips || flips > tt.maxFlips {
				t.Fatalf("%d transitions, want in [%d, %d]", flips, tt.minFlips, tt.maxFlips)
			}
		})
	}
}

func TestBoundedMemory(t *testing.T) {
	n := 10_000_000
	if testing.Short() || raceEnabled {
		n = 1_000_000
	}
	const capacity = 1024
	clk := newFakeClock()
	d := mustNew(t, &hotkey.Config{Capacity: capacity, Now: clk.Now})
	buf := make([]byte, 0, 32)
	for i := range n {
		if i%1000 == 0 {
			clk.Advance(time.Millisecond)
		}
		buf = strconv.AppendInt(append(buf[:0], "user:"...), int64(i), 10)
		d.Observe(string(buf))
	}
	if got := d.Tracked(); got > capacity {
		t.Fatalf("tracking %d keys after %d distinct ones, capacity %d", got, n, capacity)
	}
	if err := d.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if top := d.Top(5); len(top) != 5 || top[0].Hot {
		t.Fatalf("Top(5) = %v", top)
	}
}

func TestZeroAllocs(t *testing.T) {
	clk := newFakeClock()
	d := mustNew(t, &hotkey.Config{Capacity: 256, Now: clk.Now})
	keys := make([]string, 4096)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	for range 20_000 { // make "hot" hot so that IsHot takes the map path
		clk.Advance(10 * time.Microsecond)
		d.Observe("hot")
	}
	if !d.IsHot("hot") {
		t.Fatal("hot is not hot")
	}
	i := 0
	observe := testing.AllocsPerRun(10_000, func() {
		clk.Advance(10 * time.Microsecond)
		d.Observe(keys[i%len(keys)]) // mostly untracked keys: the replacement path
		d.Observe("hot")
		i++
	})
	isHot := testing.AllocsPerRun(10_000, func() {
		_ = d.IsHot("hot")
		_ = d.IsHot(keys[i%len(keys)])
		i++
	})
	if observe != 0 || isHot != 0 {
		t.Fatalf("allocs per run: Observe %v, IsHot %v; want 0", observe, isHot)
	}
}

func TestConcurrent(t *testing.T) {
	clk := newFakeClock()
	d := mustNew(t, &hotkey.Config{Window: time.Second, Capacity: 512, Now: clk.Now})
	perG := 50_000
	if raceEnabled {
		perG = 20_000
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			z := rand.NewZipf(r, 1.1, 1, 100_000)
			for i := range perG {
				clk.Advance(10 * time.Microsecond)
				if g == 0 && i == perG/2 {
					// A Reset amid the observations, with half of them
					// still to come (a reader's would race with the end).
					d.Reset()
				}
				if i%4 == 0 {
					d.Observe("celebrity")
				} else {
					d.Observe("z:" + strconv.FormatUint(z.Uint64(), 10))
				}
			}
		})
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				_ = d.IsHot("celebrity")
				_ = d.IsHot("z:0")
			}
		}
	})
	readers.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				if top := d.Top(10); len(top) > 10 {
					t.Errorf("Top(10) returned %d keys", len(top))
				}
			}
		}
	})
	wg.Wait()
	close(stop)
	readers.Wait()
	if err := d.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	if got := d.Tracked(); got > 512 {
		t.Fatalf("tracked %d > capacity", got)
	}
	// The hot set is refreshed by observations once per Window/100 of
	// clock time: one more, that much later, refreshes it with all the
	// counts (the last refresh may have come before the last writers'
	// observations).
	clk.Advance(time.Second / 100)
	d.Observe("z:1")
	if !d.IsHot("celebrity") {
		t.Fatalf("celebrity at 25%% of concurrent traffic is not hot; top: %v", d.Top(3))
	}
}
