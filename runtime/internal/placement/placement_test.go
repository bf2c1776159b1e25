package placement_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/groupstate/groupstate/runtime/internal/placement"
)

// current turns a plan into the owners and standbys the next plan starts from (what the
// leases would record once the plan is carried out).
func current(plan []placement.Assignment) (owners map[int]string, standbys map[int][]string) {
	owners, standbys = map[int]string{}, map[int][]string{}
	for _, a := range plan {
		owners[a.Partition], standbys[a.Partition] = a.Owner, a.Standbys
	}
	return owners, standbys
}

func loads(plan []placement.Assignment) map[string]int {
	l := map[string]int{}
	for _, a := range plan {
		l[a.Owner]++
	}
	return l
}

func check(t *testing.T, in placement.Input, plan []placement.Assignment) {
	t.Helper()
	if len(plan) != in.Partitions {
		t.Fatalf("%d assignments for %d partitions", len(plan), in.Partitions)
	}
	limit := (in.Partitions + len(in.Members) - 1) / len(in.Members)
	for m, n := range loads(plan) {
		if !slices.Contains(in.Members, m) {
			t.Fatalf("owner %q is not a live member", m)
		}
		if n > limit {
			t.Fatalf("%s owns %d partitions, above ceil(%d/%d) = %d", m, n, in.Partitions, len(in.Members), limit)
		}
	}
	for _, a := range plan {
		if slices.Contains(a.Standbys, a.Owner) {
			t.Fatalf("partition %d: the owner %s is also its standby", a.Partition, a.Owner)
		}
		if want := min(in.Standbys, len(in.Members)-1); len(a.Standbys) != want || a.Missing != in.Standbys-want {
			t.Fatalf("partition %d: standbys %v (missing %d), want %d", a.Partition, a.Standbys, a.Missing, want)
		}
	}
}

func TestPlanPlacesEveryPartition(t *testing.T) {
	in := placement.Input{Deployment: "counts", Partitions: 16, Standbys: 1, Members: []string{"r1", "r2", "r3"}}
	plan := placement.Plan(in)
	check(t, in, plan)
	for m, n := range loads(plan) {
		if n < 5 || n > 6 {
			t.Fatalf("%s owns %d of 16 partitions, want 5 or 6", m, n)
		}
	}
}

func TestPlanIgnoresInputOrder(t *testing.T) {
	a := placement.Plan(placement.Input{Deployment: "d", Partitions: 16, Standbys: 2, Members: []string{"r1", "r2", "r3", "r4"}})
	b := placement.Plan(placement.Input{Deployment: "d", Partitions: 16, Standbys: 2, Members: []string{"r4", "r2", "r1", "r3"}})
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("plans differ with the members reordered:\n%v\n%v", a, b)
	}
}

// TestPlanJoinMovesOnlyToTheNewcomer: a fourth runtime takes its share, and no partition
// moves between the other three.
func TestPlanJoinMovesOnlyToTheNewcomer(t *testing.T) {
	for _, parts := range []int{1, 4, 10, 16, 64, 1024} {
		t.Run(fmt.Sprint(parts), func(t *testing.T) {
			in := placement.Input{Deployment: "d", Partitions: parts, Standbys: 1, Members: []string{"r1", "r2", "r3"}}
			before := placement.Plan(in)
			in.Owners, in.CurrentStandbys = current(before)
			in.Members = append(in.Members, "r4")
			after := placement.Plan(in)
			check(t, in, after)
			for p := range after {
				if after[p].Owner != before[p].Owner && after[p].Owner != "r4" {
					t.Fatalf("partition %d moved from %s to %s, not to the newcomer", p, before[p].Owner, after[p].Owner)
				}
			}
			if parts >= 4 && loads(after)["r4"] == 0 {
				t.Fatalf("the newcomer got nothing of %d partitions", parts)
			}
		})
	}
}

// TestPlanDeadOwnerGoesToStandby: the partitions of a runtime that died go to their standbys,
// and the live runtimes keep theirs.
func TestPlanDeadOwnerGoesToStandby(t *testing.T) {
	in := placement.Input{Deployment: "d", Partitions: 16, Standbys: 1, Members: []string{"r1", "r2", "r3"}}
	before := placement.Plan(in)
	in.Owners, in.CurrentStandbys = current(before)
	in.Members = []string{"r1", "r3"}
	after := placement.Plan(in)
	check(t, in, after)
	limit, l := 8, loads(after)
	for p, a := range after {
		switch b := before[p]; {
		case b.Owner != "r2" && a.Owner != b.Owner:
			t.Fatalf("partition %d of live %s moved to %s", p, b.Owner, a.Owner)
		case b.Owner == "r2" && a.Owner != b.Standbys[0] && l[b.Standbys[0]] < limit:
			t.Fatalf("partition %d of dead r2 went to %s, not its standby %s, which had room", p, a.Owner, b.Standbys[0])
		}
	}
}

func TestPlanWithoutEnoughRuntimes(t *testing.T) {
	plan := placement.Plan(placement.Input{Deployment: "d", Partitions: 3, Standbys: 2, Members: []string{"only"}})
	for _, a := range plan {
		if a.Owner != "only" || len(a.Standbys) != 0 || a.Missing != 2 {
			t.Fatalf("%+v", a)
		}
	}
	for _, a := range placement.Plan(placement.Input{Deployment: "d", Partitions: 2, Standbys: 1}) {
		if a.Owner != "" || a.Missing != 1 {
			t.Fatalf("no members: %+v", a)
		}
	}
}

// TestPlanBoundsRandomHistories: whatever sequence of joins and deaths, every plan owns every
// partition within the load bound.
func TestPlanBoundsRandomHistories(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		in := placement.Input{Deployment: "d", Partitions: 1 + rng.IntN(40), Standbys: rng.IntN(3)}
		pool := []string{"a", "b", "c", "d", "e", "f"}
		for range 8 {
			in.Members = nil
			for _, m := range pool {
				if rng.IntN(2) == 0 {
					in.Members = append(in.Members, m)
				}
			}
			if len(in.Members) == 0 {
				continue
			}
			plan := placement.Plan(in)
			check(t, in, plan)
			in.Owners, in.CurrentStandbys = current(plan)
		}
	}
}

func BenchmarkPlan(b *testing.B) {
	in := placement.Input{Deployment: "d", Partitions: 1024, Standbys: 1, Members: []string{"r1", "r2", "r3", "r4", "r5"}}
	in.Owners, in.CurrentStandbys = current(placement.Plan(in))
	for b.Loop() {
		placement.Plan(in)
	}
}
