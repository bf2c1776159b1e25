package state

import "testing"

// BenchmarkJoinStateDrop: benchJoinState evicting with ListDropFirst (what the sample does
// now).
func BenchmarkJoinStateDrop(b *testing.B) {
	benchJoinState(b, func(tx *KeyTxn, v int, _ [][]byte) error { return tx.ListDropFirst(v, 1) })
}
