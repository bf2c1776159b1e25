package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// VarKind is the kind of a state variable of an ABI v2 (transformWithState) handler;
// its numbers are the ABI's.
type VarKind uint8

const (
	// VarValue is a single value.
	VarValue VarKind = 1
	// VarList is a list of elements, appended to in order.
	VarList VarKind = 2
	// VarMap is a map from byte-string keys (ordered bytewise) to values.
	VarMap VarKind = 3
)

// String returns "value", "list", "map" or "kind(N)".
func (k VarKind) String() string {
	switch k {
	case VarValue:
		return "value"
	case VarList:
		return "list"
	case VarMap:
		return "map"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// VarDecl declares a state variable.
type VarDecl struct {
	// Name identifies the variable across revisions of the handler.
	Name string
	// Kind is the variable's kind; it may not change once declared.
	Kind VarKind
	// TTLMs, when > 0, makes every value, list element or map entry of the
	// variable expire TTLMs milliseconds (processing time) after it was last
	// written. 0: no TTL. It may change between revisions; the change applies
	// to later writes.
	TTLMs int64
}

// Vars is a deployment's resolved variable declarations, in declaration order: the
// index of a variable in Vars is its index in the ABI's ops. Batch.DeclareVars and
// Deployment.Vars return one; it is immutable and safe for concurrent use.
type Vars struct {
	decls []VarDecl
	ids   []uint32
}

// Len returns the number of variables.
func (v *Vars) Len() int {
	if v == nil {
		return 0
	}
	return len(v.decls)
}

// Decl returns the declaration of variable i (0 <= i < Len()).
func (v *Vars) Decl(i int) VarDecl { return v.decls[i] }

// Index returns the index of the variable named name, or -1.
func (v *Vars) Index(name string) int {
	if v == nil {
		return -1
	}
	return slices.IndexFunc(v.decls, func(d VarDecl) bool { return d.Name == name })
}

// catalog is the stored catalog: P 'c' -> u8 version (1) | u32 next id | uvarint n |
// n × (u32 id | u8 kind | i64 ttl | uvarint len(name) name), ordered by id.
type catalog struct {
	next uint32 // the id the next new variable gets (ids start at 1)
	vars []catalogVar
}

type catalogVar struct {
	id uint32
	VarDecl
}

const catalogVersion = 1

func (c *catalog) byName(name string) (catalogVar, bool) {
	for _, v := range c.vars {
		if v.Name == name {
			return v, true
		}
	}
	return catalogVar{}, false
}

func appendCatalog(dst []byte, c *catalog) []byte {
	dst = append(dst, catalogVersion)
	dst = binary.BigEndian.AppendUint32(dst, c.next)
	dst = binary.AppendUvarint(dst, uint64(len(c.vars)))
	for _, v := range c.vars {
		dst = binary.BigEndian.AppendUint32(dst, v.id)
		dst = append(dst, byte(v.Kind))
		dst = binary.BigEndian.AppendUint64(dst, uint64(v.TTLMs))
		dst = binary.AppendUvarint(dst, uint64(len(v.Name)))
		dst = append(dst, v.Name...)
	}
	return dst
}

func decodeCatalog(b []byte) (*catalog, error) {
	bad := func(what string) (*catalog, error) {
		return nil, fmt.Errorf("%w: variable catalog: %s", ErrCorrupt, what)
	}
	if len(b) < 5 || b[0] != catalogVersion {
		return bad("header")
	}
	c := &catalog{next: binary.BigEndian.Uint32(b[1:])}
	b = b[5:]
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)) {
		return bad("count")
	}
	b = b[w:]
	for range n {
		if len(b) < 4+1+8 {
			return bad("declaration")
		}
		v := catalogVar{id: binary.BigEndian.Uint32(b)}
		v.Kind = VarKind(b[4])
		v.TTLMs = int64(binary.BigEndian.Uint64(b[5:]))
		b = b[13:]
		l, w := binary.Uvarint(b)
		if w <= 0 || l > uint64(len(b)-w) {
			return bad("name")
		}
		v.Name = string(b[w : w+int(l)])
		b = b[w+int(l):]
		if v.id == 0 || v.id >= c.next || (len(c.vars) > 0 && v.id <= c.vars[len(c.vars)-1].id) {
			return bad("id")
		}
		c.vars = append(c.vars, v)
	}
	if len(b) != 0 {
		return bad("trailing bytes")
	}
	return c, nil
}

// readCatalog reads the catalog through r (the zero catalog when none is stored).
func readCatalog(r pebble.Reader, prefix []byte) (*catalog, error) {
	raw, closer, err := r.Get(sectionKey(nil, prefix, sectionCatalog))
	if errors.Is(err, pebble.ErrNotFound) {
		return &catalog{next: 1}, nil
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return decodeCatalog(raw)
}

// checkDecls validates decls and checks them against the catalog c: a variable
// may not change kind.
func checkDecls(c *catalog, decls []VarDecl) error {
	for i, d := range decls {
		if d.Name == "" {
			return fmt.Errorf("%w: variable %d has no name", ErrInvalidVar, i)
		}
		if d.Kind < VarValue || d.Kind > VarMap {
			return fmt.Errorf("%w: state variable %s has kind %d", ErrInvalidVar, d.Name, uint8(d.Kind))
		}
		if d.TTLMs < 0 {
			return fmt.Errorf("%w: state variable %s has a negative TTL", ErrInvalidVar, d.Name)
		}
		for _, e := range decls[:i] {
			if e.Name == d.Name {
				return fmt.Errorf("%w: state variable %s is declared twice", ErrInvalidVar, d.Name)
			}
		}
		if old, ok := c.byName(d.Name); ok && old.Kind != d.Kind {
			return fmt.Errorf("%w: state variable %s was declared %s and is now %s", ErrVarKind, d.Name, old.Kind, d.Kind)
		}
	}
	return nil
}

// varsOf resolves decls, already checked, against c (every one must be in it).
func varsOf(c *catalog, decls []VarDecl) *Vars {
	v := &Vars{decls: slices.Clone(decls), ids: make([]uint32, len(decls))}
	for i, d := range decls {
		cv, _ := c.byName(d.Name)
		v.ids[i] = cv.id
	}
	return v
}

// Vars returns the deployment's committed variable declarations, in the order their
// ids were given (not necessarily the order of the handler's declarations: use
// Batch.DeclareVars for those). It is empty when none was declared.
func (d *Deployment) Vars() (*Vars, error) {
	if err := d.acquire(); err != nil {
		return nil, err
	}
	defer d.s.release()
	c, err := readCatalog(d.s.db, d.prefix)
	if err != nil {
		return nil, err
	}
	decls := make([]VarDecl, len(c.vars))
	for i, v := range c.vars {
		decls[i] = v.VarDecl
	}
	return varsOf(c, decls), nil
}

// CheckVars reports whether decls may replace the deployment's committed
// declarations, without writing anything: the error wraps ErrVarKind when a
// variable changes kind ("state variable NAME was declared KIND1 and is now
// KIND2"), ErrInvalidVar when decls are malformed (an empty name, a name
// declared twice, an unknown kind, a negative TTL).
func (d *Deployment) CheckVars(decls []VarDecl) error {
	if err := d.acquire(); err != nil {
		return err
	}
	defer d.s.release()
	c, err := readCatalog(d.s.db, d.prefix)
	if err != nil {
		return err
	}
	return checkDecls(c, decls)
}

// DeclareVars makes decls the deployment's variables, in the batch: a variable
// already declared keeps its id (and its content; a TTL change applies to later
// writes), a new one gets an id never used before in the deployment, and every
// stored entry of a variable no longer declared is deleted (one range deletion;
// the key records of the keys that held it are updated, which reads each such
// key's head record once). It returns the resolved declarations, indexed as decls.
// It fails as CheckVars does, writing nothing, and may not be called while a
// KeyTxn of the batch is open. decls is copied.
func (b *Batch) DeclareVars(decls []VarDecl) (*Vars, error) {
	release, err := b.enter()
	if err != nil {
		return nil, err
	}
	defer release()
	c, err := b.catalog()
	if err != nil {
		return nil, err
	}
	if err := checkDecls(c, decls); err != nil {
		return nil, err
	}
	next := &catalog{next: c.next}
	changed := false
	for _, old := range c.vars {
		i := slices.IndexFunc(decls, func(d VarDecl) bool { return d.Name == old.Name })
		if i < 0 {
			if err := b.dropVar(old.id); err != nil {
				return nil, err
			}
			changed = true
			continue
		}
		if decls[i].TTLMs != old.TTLMs {
			changed = true
		}
		next.vars = append(next.vars, catalogVar{id: old.id, VarDecl: decls[i]})
	}
	for _, d := range decls {
		if _, ok := c.byName(d.Name); !ok {
			next.vars = append(next.vars, catalogVar{id: next.next, VarDecl: d})
			next.next++
			changed = true
		}
	}
	if changed {
		k := sectionKey(nil, b.d.prefix, sectionCatalog)
		b.vset(k, appendCatalog(nil, next))
		b.cat = next
	}
	return varsOf(next, decls), nil
}

// dropVar deletes every entry of variable id, fixing the key records of the keys
// that held it.
func (b *Batch) dropVar(id uint32) error {
	p := b.d.prefix
	lower := varIDPrefix(nil, p, id)
	upper := varIDPrefix(nil, p, id+1)
	iter, err := b.vb.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return err
	}
	recs := map[string]int{}
	for ok := iter.First(); ok; {
		_, key, tag, _, valid := parseVarData(iter.Key()[len(p)+1:])
		if !valid {
			_ = iter.Close()
			return fmt.Errorf("%w: variable data key %q", ErrCorrupt, iter.Key())
		}
		if tag == tagHead {
			recs[string(key)]++
		}
		ok = iter.SeekGE(prefixEnd(varKeyPrefix(nil, p, id, key)))
	}
	if err := errors.Join(iter.Error(), iter.Close()); err != nil {
		return err
	}
	for key, n := range recs {
		r, err := b.keyRec([]byte(key))
		if err != nil {
			return err
		}
		next := r
		next.vars -= min(next.vars, uint64(n))
		b.putKeyRec([]byte(key), r, next)
	}
	b.vdelRange(lower, upper)
	return nil
}
