package fleetseam

import "testing"

type opts struct{ n int }
type cl struct{ n int }

type root struct {
	Root
	n int
}

// TestSetFor: For returns the Funcs Set registered, for the same types,
// and refuses others.
func TestSetFor(t *testing.T) {
	Set(Funcs[opts, cl]{
		Options: func(o *opts) Root { return root{n: o.n} },
		Client:  func(c *cl) Root { return root{n: -c.n} },
	})
	f := For[opts, cl]()
	if r := f.Options(&opts{3}).(root); r.n != 3 {
		t.Errorf("Options: %d, want 3", r.n)
	}
	if r := f.Client(&cl{4}).(root); r.n != -4 {
		t.Errorf("Client: %d, want -4", r.n)
	}
	defer func() {
		if recover() == nil {
			t.Error("For of other types than the root's did not panic")
		}
	}()
	For[cl, opts]()
}
