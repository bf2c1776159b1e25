// Package history reads what a deployment's recorded batches read (engine.Manifest): the
// input stream and filters of a partition, and a batch's rows, fetched by sequence and made
// into engine rows as the runtime made them. Replay and shadow deployments run batches again
// from it.
package history

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/engine"
	"github.com/groupstate/groupstate/runtime/internal/input"
	"github.com/groupstate/groupstate/runtime/internal/topology"
	"github.com/groupstate/groupstate/runtime/spec"
)

// ErrGone is returned when a stream no longer holds what a recorded batch read (its retention
// removed it); the message names the batch and its sequences.
var ErrGone = errors.New("history: no longer retained")

// Input returns where partition p of the deployment of sp reads its rows: the stream and the
// filters of its consumer. inputOf names the deployment whose input-side streams it reads
// (registry.Record.InputOf: a shadow's primary); empty, sp.Name.
func Input(ctx context.Context, js jetstream.JetStream, sp *spec.Spec, inputOf string, p int) (stream string, filters []string, err error) {
	stream = sp.Input.Stream
	if stream == "" && sp.Partitions <= 1 && !sp.HasInputs() {
		if stream, err = js.StreamNameBySubject(ctx, sp.Input.Subjects[0]); err != nil {
			return "", nil, fmt.Errorf("history: the stream of input subject %s: %w", sp.Input.Subjects[0], err)
		}
	}
	stream, filters = topology.Read(sp, inputOf, p, stream)
	return stream, filters, nil
}

// Row makes the engine row of a stored input message of the deployment of sp, as its runtime
// made it (inputOf: see [Input]).
func Row(sp *spec.Spec, inputOf string, m input.StoredMsg) (engine.Row, error) {
	row := engine.Row{Data: m.Data, Subject: m.Subject, Sequence: m.Sequence}
	switch {
	case sp.HasInputs():
		name, orig, ok := input.SplitInputsSubject(cmp.Or(inputOf, sp.Name), m.Subject)
		i := slices.IndexFunc(sp.Inputs, func(in spec.NamedInput) bool { return in.Name == name })
		if !ok || i < 0 {
			return row, fmt.Errorf("history: input sequence %d: subject %s is not of one of the spec's inputs", m.Sequence, m.Subject)
		}
		row.Subject, row.Input = orig, i
	case sp.Partitions > 1:
		row.Subject = input.InputSubject(cmp.Or(inputOf, sp.Name), &input.Msg{Subject: m.Subject, Header: m.Header})
	}
	return row, nil
}

// Rows reads the rows of the recorded batch man from rd, which reads the batch's input stream
// (named stream, for errors) and is at or before the batch's first sequence: the man.Rows
// messages from its first sequence to its last, made into rows with Row (inputOf: see
// [Input]). Messages before the
// first sequence are skipped (read again after a crash, before the position: in no batch).
// Fewer messages than the batch read fail with [ErrGone].
func Rows(ctx context.Context, rd *input.StreamReader, stream string, sp *spec.Spec, inputOf string, man engine.Manifest) ([]engine.Row, error) {
	if man.Rows == 0 {
		return nil, nil
	}
	rows := make([]engine.Row, 0, man.Rows)
	for len(rows) < man.Rows {
		m, ok, err := rd.Next(ctx)
		if err != nil {
			return nil, err
		}
		if !ok || m.Sequence > man.LastSequence {
			return nil, fmt.Errorf("%w: input stream %s holds %d of the %d rows of batch %d (sequences %d to %d)",
				ErrGone, stream, len(rows), man.Rows, man.Batch, man.FirstSequence, man.LastSequence)
		}
		if m.Sequence < man.FirstSequence {
			continue
		}
		row, err := Row(sp, inputOf, m)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}
