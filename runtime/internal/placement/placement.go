// Package placement decides which runtime owns each partition of a deployment, and which
// runtimes keep warm standby copies of it. Every runtime computes the same plan from the same
// inputs (the live members and the current owners and standbys, as the leases record them),
// so no coordinator is needed: a runtime acquires the partitions the plan gives it and
// releases the ones it no longer gets.
//
// The plan is
//   - sticky: a live owner keeps its partitions while it is not above the load bound, so a
//     join moves only the partitions the newcomer takes;
//   - bounded: no runtime owns more than ceil(partitions / live members);
//   - standby-first: a partition whose owner is gone (or sheds it) goes to a live standby of
//     it when one has room, so a failover restores from a warm copy;
//   - otherwise rendezvous-ranked: a free partition goes to the live runtime that ranks it
//     highest (a hash of runtime, deployment and partition) among those with room (first
//     below floor(partitions / live members), then below the bound), so the choice is
//     spread evenly and does not depend on the order of the inputs.
//
// [Decide] is the other half: given the plan's assignment of one partition and what a
// runtime knows of it (the lease, a runner or a standby copy there, a hand-over under way),
// it returns the one [Action] that runtime takes (keep, acquire, hand over, wait for a warm
// copy, stop fenced, keep a standby copy, drop the copy). Both are pure functions: the
// package reads no clock, no store and no network (it imports nothing of NATS), and the
// service gathers the facts and carries the actions out.
package placement

import (
	"cmp"
	"slices"
	"strconv"
)

// Input is what a plan is computed from. Members and the runtimes named in Owners and
// Standbys are runtime IDs.
type Input struct {
	// Deployment is the deployment's name (it salts the ranking, so deployments spread
	// differently).
	Deployment string
	// Partitions is the number of partitions (at least 1).
	Partitions int
	// Standbys is the number of standby copies wanted per partition.
	Standbys int
	// Members are the live runtimes, in any order, without repeats.
	Members []string
	// Owners are the current owners by partition (missing or "": none); owners that are not
	// in Members are gone.
	Owners map[int]string
	// CurrentStandbys are the current standbys by partition, in the same way.
	CurrentStandbys map[int][]string
}

// Assignment is one partition's place in a plan.
type Assignment struct {
	Partition int
	// Owner is the runtime that should own the partition ("" only when there are no live
	// members).
	Owner string
	// Standbys are the runtimes that should keep a standby copy: at most Input.Standbys,
	// fewer when there are not enough other live runtimes (Missing says how many fewer).
	Standbys []string
	Missing  int
}

// Plan computes the assignment of every partition, in partition order. It is a pure
// function of in: the same input (whatever the order of Members) gives the same plan.
func Plan(in Input) []Assignment {
	members := slices.Clone(in.Members)
	slices.Sort(members)
	live := make(map[string]bool, len(members))
	for _, m := range members {
		live[m] = true
	}
	out := make([]Assignment, in.Partitions)
	for p := range out {
		out[p].Partition = p
	}
	if len(members) == 0 {
		for p := range out {
			out[p].Missing = in.Standbys
		}
		return out
	}
	limit := (in.Partitions + len(members) - 1) / len(members)
	load := make(map[string]int, len(members))

	// 1. Live owners keep their partitions, up to the bound: those they rank highest first,
	// so what an overloaded owner sheds is what others rank higher.
	kept := map[string][]int{}
	for p := 0; p < in.Partitions; p++ {
		if o := in.Owners[p]; live[o] {
			kept[o] = append(kept[o], p)
		}
	}
	for _, m := range members {
		ps := kept[m]
		slices.SortFunc(ps, func(a, b int) int {
			return cmp.Or(cmp.Compare(score(m, in.Deployment, b), score(m, in.Deployment, a)), cmp.Compare(a, b))
		})
		for _, p := range ps[:min(len(ps), limit)] {
			out[p].Owner = m
			load[m]++
		}
	}
	// 2. A free partition goes to a live standby of it with room, 3. else to the runtime
	// that ranks it highest among those with room.
	for p := 0; p < in.Partitions; p++ {
		if out[p].Owner != "" {
			continue
		}
		for _, s := range in.CurrentStandbys[p] {
			if live[s] && load[s] < limit {
				out[p].Owner = s
				load[s]++
				break
			}
		}
	}
	// The ranked pass fills every runtime to floor(partitions / members) before any gets
	// more, so a plan made from nothing is as even as the bound allows.
	for _, bound := range []int{in.Partitions / len(members), limit} {
		for p := 0; p < in.Partitions; p++ {
			if out[p].Owner != "" {
				continue
			}
			for _, m := range ranked(members, in.Deployment, p) {
				if load[m] < bound {
					out[p].Owner = m
					load[m]++
					break
				}
			}
		}
	}
	// Standbys: the current ones that are live and not the owner, then the highest ranked.
	for p := range out {
		want := min(in.Standbys, len(members)-1)
		var sb []string
		for _, s := range in.CurrentStandbys[p] {
			if len(sb) < want && live[s] && s != out[p].Owner && !slices.Contains(sb, s) {
				sb = append(sb, s)
			}
		}
		for _, m := range ranked(members, in.Deployment, p) {
			if len(sb) < want && m != out[p].Owner && !slices.Contains(sb, m) {
				sb = append(sb, m)
			}
		}
		out[p].Standbys = sb
		out[p].Missing = in.Standbys - len(sb)
	}
	return out
}

// ranked returns members ordered by how highly they rank partition p, highest first.
func ranked(members []string, deployment string, p int) []string {
	type scored struct {
		m string
		s uint64
	}
	r := make([]scored, len(members))
	for i, m := range members {
		r[i] = scored{m, score(m, deployment, p)}
	}
	slices.SortFunc(r, func(a, b scored) int { return cmp.Or(cmp.Compare(b.s, a.s), cmp.Compare(a.m, b.m)) })
	out := make([]string, len(r))
	for i := range r {
		out[i] = r[i].m
	}
	return out
}

// score is runtime m's rendezvous score for partition p of deployment: FNV-1a 64 of the
// three, a fact every runtime computes alike.
func score(m, deployment string, p int) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	add := func(b byte) { h = (h ^ uint64(b)) * prime }
	for i := range len(m) {
		add(m[i])
	}
	add(0)
	for i := range len(deployment) {
		add(deployment[i])
	}
	add(0)
	var num [20]byte
	for _, b := range strconv.AppendInt(num[:0], int64(p), 10) {
		add(b)
	}
	return mix(h)
}

// mix finalizes an FNV hash (the murmur3 64-bit finalizer): FNV's low bits vary little
// between inputs that differ only in their last bytes, and scores are compared whole.
func mix(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}
