package state

import (
	"math"

	"github.com/cockroachdb/pebble/v2"
)

// VarState is one variable of a key, as Deployment.KeyVars reads it.
type VarState struct {
	// Decl is the variable's declaration.
	Decl VarDecl
	// Value and HasValue are a value variable's value.
	Value    []byte
	HasValue bool
	// Elements are a list variable's elements, in order.
	Elements [][]byte
	// Entries are a map variable's entries, in bytewise key order.
	Entries []MapEntry
}

// KeyState is the ABI v2 state of one key: its variables and timers.
type KeyState struct {
	// Vars holds every declared variable, in the order of Deployment.Vars,
	// empty ones included.
	Vars []VarState
	// Timers are the key's timers, ascending.
	Timers []int64
}

// KeyVars reads all of key's committed variables and timers (for a dump), from one
// snapshot: items whose TTL expired at nowMs are left out (math.MinInt64 shows them
// all). Its cost is proportional to the key's content. The returned slices are the
// caller's.
func (d *Deployment) KeyVars(key []byte, nowMs int64) (KeyState, error) {
	if err := d.acquire(); err != nil {
		return KeyState{}, err
	}
	defer d.s.release()
	snap := d.s.db.NewSnapshot()
	defer snap.Close()
	c, err := readCatalog(snap, d.prefix)
	if err != nil {
		return KeyState{}, err
	}
	decls := make([]VarDecl, len(c.vars))
	for i, v := range c.vars {
		decls[i] = v.VarDecl
	}
	vars := varsOf(c, decls)
	t := &KeyTxn{d: d, r: snap, vars: vars, key: key, now: nowMs}
	var ks KeyState
	for i, decl := range decls {
		vs := VarState{Decl: decl}
		switch decl.Kind {
		case VarValue:
			vs.Value, vs.HasValue, err = t.ValueGet(i)
		case VarList:
			var cursor uint64
			for err == nil {
				var elems [][]byte
				elems, cursor, err = t.ListRead(i, cursor, math.MaxInt32)
				vs.Elements = append(vs.Elements, elems...)
				if cursor == 0 {
					break
				}
			}
		case VarMap:
			var cursor []byte
			for more := true; more && err == nil; {
				var entries []MapEntry
				entries, cursor, more, err = t.MapRead(i, cursor, math.MaxInt32)
				vs.Entries = append(vs.Entries, entries...)
			}
		}
		if err != nil {
			return KeyState{}, err
		}
		ks.Vars = append(ks.Vars, vs)
	}
	if ks.Timers, err = t.Timers(); err != nil {
		return KeyState{}, err
	}
	return ks, nil
}

// VarKeys calls fn, in key order, for the keys that hold ABI v2 state (a variable
// with content, expired or not yet removed, or a timer), with the number of their
// variables holding content and of their timers, starting strictly after `after`
// (nil: from the first key) and at most limit of them (limit <= 0: all). fn's key is
// only valid during the call. An error from fn stops the scan and is returned.
func (d *Deployment) VarKeys(after []byte, limit int, fn func(key []byte, vars, timers int) error) error {
	if err := d.acquire(); err != nil {
		return err
	}
	defer d.s.release()
	section := sectionKey(nil, d.prefix, sectionKeyRec)
	lower := section
	if after != nil {
		lower = append(keyRecKey(nil, d.prefix, after), 0)
	}
	iter, err := d.s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(section)})
	if err != nil {
		return err
	}
	defer iter.Close()
	n := 0
	for ok := iter.First(); ok && (limit <= 0 || n < limit); ok = iter.Next() {
		v, err := iter.ValueAndErr()
		if err != nil {
			return err
		}
		r, err := decodeKeyRec(v)
		if err != nil {
			return err
		}
		if err := fn(iter.Key()[len(section):], int(r.vars), int(r.timers)); err != nil {
			return err
		}
		n++
	}
	return iter.Error()
}
