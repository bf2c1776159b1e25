package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/groupstate/groupstate/abi"
	"github.com/groupstate/groupstate/runtime/internal/handler"
)

// TestInstrumentedKept: a host with an InstrumentedDir leaves its module there as
// instrumented, and a later host of the same module and limits reads it back instead of
// instrumenting it again (a warm start's largest cost after wazero's own decoding); an entry
// that is torn or corrupt is not used but written again; other limits are other entries, and a
// module beyond a limit is refused whatever the directory holds.
func TestInstrumentedKept(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg := testConfig(sampleWasm(t, "logincount"))
	cfg.Init.Mode = abi.TimeoutProcessingTime
	cfg.InstrumentedDir = dir
	call := &handler.Call{ProcessingTimeMs: 1000, Groups: []handler.Group{{Key: []byte(`"ada"`), Rows: [][]byte{[]byte(`{"user_id":"ada"}`)}}}}
	// start starts a host of cfg, runs a call and closes it (the last host of its module, so
	// the next start builds the module again), and returns how many modules it instrumented.
	start := func(cfg Config) int64 {
		t.Helper()
		before := instrumentations.Load()
		h, err := New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		res := make([]handler.Result, 1)
		if err := h.Process(ctx, call, res); err != nil || res[0].Err != nil || len(res[0].Emits) != 1 ||
			string(res[0].Emits[0]) != `{"user_id":"ada","total_logins":1}` {
			t.Fatalf("process: %v %+v", err, res)
		}
		if err := h.Close(ctx); err != nil {
			t.Fatal(err)
		}
		return instrumentations.Load() - before
	}
	entries := func() []string {
		t.Helper()
		des, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, de := range des {
			names = append(names, de.Name())
		}
		return names
	}

	if n := start(cfg); n != 1 {
		t.Fatalf("the first host instrumented %d modules, want 1", n)
	}
	names := entries()
	if len(names) != 1 || strings.HasPrefix(names[0], ".tmp") {
		t.Fatalf("the directory holds %q, want one entry", names)
	}
	entry := filepath.Join(dir, names[0])
	if n := start(cfg); n != 0 {
		t.Fatalf("a host with the entry instrumented %d modules, want 0", n)
	}

	// A torn entry, and one whose module has a byte changed, are instrumented again and
	// rewritten.
	whole, err := os.ReadFile(entry)
	if err != nil {
		t.Fatal(err)
	}
	flipped := append([]byte(nil), whole...)
	flipped[len(flipped)-100] ^= 0x40
	for name, b := range map[string][]byte{"torn": whole[:len(whole)/2], "flipped": flipped, "empty": nil} {
		if err := os.WriteFile(entry, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if n := start(cfg); n != 1 {
			t.Fatalf("%s entry: the host instrumented %d modules, want 1", name, n)
		}
		if got, err := os.ReadFile(entry); err != nil || string(got) != string(whole) {
			t.Fatalf("%s entry: not written again (%v)", name, err)
		}
	}

	// Other limits: another entry.
	other := cfg
	other.Load.StackBytes = 1 << 20
	if n := start(other); n != 1 {
		t.Fatalf("a host with other limits instrumented %d modules, want 1", n)
	}
	if names := entries(); len(names) != 2 {
		t.Fatalf("the directory holds %q, want two entries", names)
	}
	// Limits the module is beyond: refused, though an entry of it (under other limits) is there.
	tight := cfg
	tight.Load.Functions = 5
	if _, err := New(ctx, tight); !errors.Is(err, ErrLoadLimit) {
		t.Fatalf("a module beyond the functions limit: err = %v, want ErrLoadLimit", err)
	}
}

// TestInstrumentedKeyCoversLimits: every load limit is part of an entry's name, and a zero
// limit names the same entry as its default.
func TestInstrumentedKeyCoversLimits(t *testing.T) {
	var digest [32]byte
	base := instrumentedKey(digest, LoadLimits{})
	if instrumentedKey(digest, LoadLimits{}.withDefaults()) != base {
		t.Fatal("the defaults spelled out name another entry than the zero limits")
	}
	digest[0] = 1
	if instrumentedKey(digest, LoadLimits{}) == base {
		t.Fatal("another module names the same entry")
	}
	digest[0] = 0
	// Every field, by reflection, so that a limit added later cannot be left out.
	lt := reflect.TypeFor[LoadLimits]()
	for i := range lt.NumField() {
		var l LoadLimits
		f := reflect.ValueOf(&l).Elem().Field(i)
		switch f.Kind() {
		case reflect.Int, reflect.Int64:
			f.SetInt(7)
		case reflect.Uint32:
			f.SetUint(7)
		default:
			t.Fatalf("limit %s of kind %s: extend the test", lt.Field(i).Name, f.Kind())
		}
		if instrumentedKey(digest, l) == base {
			t.Errorf("limit %s is not part of an entry's name", lt.Field(i).Name)
		}
	}
}
