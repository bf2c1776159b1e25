// Package layers holds no code. Its test, TestLayers, pins the arrows between groupstate's
// packages: which package may depend on which, so that a move or a convenient import cannot
// quietly turn the layering around (the embeddable engine linking NATS, a runtime package
// reaching up into the service, anything importing a command).
//
// The rules are the table in layers_test.go; RATIONALE.md ("Package layout") says why each
// holds.
package layers
