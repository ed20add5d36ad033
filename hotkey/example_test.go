package hotkey_test

import (
	"fmt"
	"strconv"
	"time"

	"github.com/redshard/redshard/hotkey"
)

func Example() {
	// A fake clock makes the example deterministic; leave Now nil in
	// production.
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	d, err := hotkey.New(&hotkey.Config{
		Window: time.Second,
		Now:    func() time.Time { return now },
	})
	if err != nil {
		panic(err)
	}

	// Two seconds of 10k commands/s; every fourth one reads "celebrity".
	for i := range 20_000 {
		now = now.Add(100 * time.Microsecond)
		if i%4 == 0 {
			d.Observe("celebrity")
		} else {
			d.Observe("user:" + strconv.Itoa(i))
		}
	}
	fmt.Println(d.IsHot("celebrity"), d.IsHot("user:1"))
	for _, k := range d.Top(1) {
		fmt.Printf("%s: ~%.0f/s, hot=%v\n", k.Key, k.Rate, k.Hot)
	}
	// Output:
	// true false
	// celebrity: ~2440/s, hot=true
}

func ExampleNew() {
	_, err := hotkey.New(&hotkey.Config{MinShare: 2})
	fmt.Println(err)
	d, err := hotkey.New(nil) // all defaults
	fmt.Println(d != nil, err)
	// Output:
	// hotkey: invalid config: MinShare 2 outside [0, 1]
	// true <nil>
}
