package functions_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redshard/redshard/internal/functions"
	"github.com/redshard/redshard/internal/merge"
	"github.com/redshard/redshard/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errDiffer = errors.New("libraries differ")

func root() functions.Root {
	return functions.Root{
		Differ: errDiffer,
		ListCode: func(ctx context.Context) *redis.FunctionListCmd {
			return redis.NewFunctionListCmd(ctx, "function", "list", "withcode")
		},
		Same: merge.Same,
	}
}

func lib(name string) string {
	return fmt.Sprintf("#!lua name=%s\nredis.register_function('%s_f', function() return 1 end)", name, name)
}

// servers starts n redis-servers with the libraries named in libs[i]
// loaded on server i.
func servers(t *testing.T, libs ...[]string) []functions.Server {
	t.Helper()
	ctx := context.Background()
	out := make([]functions.Server, len(libs))
	for i, names := range libs {
		cl := redistest.Start(t).Client(t)
		for _, n := range names {
			if err := cl.FunctionLoad(ctx, lib(n)).Err(); err != nil {
				t.Fatal(err)
			}
		}
		out[i] = functions.Server{Name: fmt.Sprint("s", i), Desc: fmt.Sprint("s", i), Client: cl}
	}
	return out
}

func names(t *testing.T, s functions.Server) []string {
	t.Helper()
	libs, err := s.Client.FunctionList(context.Background(), redis.FunctionListQuery{}).Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range libs {
		out = append(out, l.Name)
	}
	return out
}

// TestGiveCarriesAgreedLibraries: sources that agree give a joining server
// their libraries; one already holding them is left as it is.
func TestGiveCarriesAgreedLibraries(t *testing.T) {
	all := servers(t, []string{"a", "b"}, []string{"b", "a"}, nil, []string{"a", "b"})
	if err := root().Give(context.Background(), all[:2], all[2:]); err != nil {
		t.Fatal(err)
	}
	for _, s := range all[2:] {
		if got := names(t, s); len(got) != 2 {
			t.Fatalf("joining %s holds %q, want a and b", s.Name, got)
		}
	}
}

// TestGiveRefusesDisagreement: sources holding different libraries, or a
// joining server holding others, are refused with Differ and nothing is
// given.
func TestGiveRefusesDisagreement(t *testing.T) {
	all := servers(t, []string{"a"}, []string{"b"}, nil)
	err := root().Give(context.Background(), all[:2], all[2:])
	if !errors.Is(err, errDiffer) {
		t.Fatalf("Give with disagreeing sources = %v, want %v", err, errDiffer)
	}
	if got := names(t, all[2]); len(got) != 0 {
		t.Fatalf("joining server holds %q after a refusal", got)
	}
	all = servers(t, []string{"a"}, []string{"c"})
	if err := root().Give(context.Background(), all[:1], all[1:]); !errors.Is(err, errDiffer) {
		t.Fatalf("Give to a server holding other libraries = %v, want %v", err, errDiffer)
	}
}

// TestGiveNothingToCarry: sources with no library leave the joining
// servers alone, even one that holds libraries of its own.
func TestGiveNothingToCarry(t *testing.T) {
	all := servers(t, nil, nil, []string{"own"})
	if err := root().Give(context.Background(), all[:2], all[2:]); err != nil {
		t.Fatal(err)
	}
	if got := names(t, all[2]); len(got) != 1 || got[0] != "own" {
		t.Fatalf("joining server holds %q, want its own library only", got)
	}
}
