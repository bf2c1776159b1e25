// Command acceptance runs the scale-out acceptance checks of docs/scaling.md on this machine:
// three nats-server processes in a JetStream cluster on loopback, groupstate serve processes
// joined to it, a deployment of samples/counter (one output {key, n} per row) split into
// partitions with changelog replication and standbys, and a loader publishing rows over many
// keys at a steady rate. It crashes, pauses, stops and adds runtimes, kills a NATS node,
// deletes every data directory, and after each step verifies that every key's outputs are
// exactly 1..c (c its rows published: no gap, no repeat) and that the state holds c. It prints
// what it measured: failover times, the pause of each moved partition, the replication cost.
//
//	go run ./scripts/acceptance                      # every check, about 10 minutes
//	go run ./scripts/acceptance -checks 1,2,3 -rows 60000
//	go run ./scripts/acceptance -keep                # keep the directory (logs, data)
//
// Both binaries are built from this checkout's go.mod into a temporary directory.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/spec"
)

var (
	checksFlag = flag.String("checks", "1,2,3,4,5,6,7,8,10", "the checks to run (docs/scaling.md, \"Acceptance\"); 9 takes 15 minutes and runs only when named")
	rowsFlag   = flag.Int("rows", 300_000, "rows of check 2 (the crash check); the other load phases publish a fifth of it each")
	rateFlag   = flag.Int("rate", 5000, "rows per second the loader publishes")
	keysFlag   = flag.Int("keys", 1000, "keys the rows are spread over")
	partsFlag  = flag.Int("partitions", 16, "partitions of the deployment")
	standbys   = flag.Int("standbys", 1, "standbys per partition")
	memberTTL  = flag.Duration("member-ttl", 5*time.Second, "the runtimes' --member-ttl")
	keep       = flag.Bool("keep", false, "keep the directory (logs, data) and say where")
)

const (
	deployment = "counter"
	outStream  = "COUNTER_OUT"
	inSubject  = "counts.load"
)

func main() {
	flag.Parse()
	log.SetFlags(log.Ltime | log.Lmicroseconds)
	checks := map[int]bool{}
	for _, c := range strings.Split(*checksFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil {
			log.Fatalf("-checks: %q is not a number", c)
		}
		checks[n] = true
	}
	dir, err := os.MkdirTemp("", "groupstate-acceptance-")
	if err != nil {
		log.Fatal(err)
	}
	h := &harness{dir: dir, checks: checks}
	code := 0
	if err := h.run(); err != nil {
		log.Printf("FAILED: %v", err)
		code = 1
		for _, p := range h.runtimes { // each writes its goroutines to its log
			p.signal(syscall.SIGCONT)
			p.signal(syscall.SIGQUIT)
		}
		time.Sleep(time.Second)
	}
	h.stopAll()
	if *keep || code != 0 {
		log.Printf("kept %s", dir)
	} else {
		os.RemoveAll(dir)
	}
	for _, line := range h.report {
		fmt.Println(line)
	}
	os.Exit(code)
}

// harness holds the processes and what was published and measured.
type harness struct {
	dir    string
	checks map[int]bool
	gs     string // the groupstate binary
	ns     string // the nats-server binary

	nodes    [3]*proc
	runtimes map[string]*proc
	nextRT   int

	nc  *nats.Conn
	js  jetstream.JetStream
	cli *client.Client

	published atomic.Int64 // rows published and acknowledged, the next row's number
	report    []string
}

// proc is one child process.
type proc struct {
	name    string
	args    []string
	dataDir string
	metrics string // HOST:PORT of a runtime's metrics
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
}

func (h *harness) say(format string, args ...any) { log.Printf("==> "+format, args...) }

// result records a measured figure or a verdict for the summary.
func (h *harness) result(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	h.report = append(h.report, line)
	log.Print("RESULT " + line)
}

func (h *harness) start(p *proc) error {
	logf, err := os.Create(filepath.Join(h.dir, p.name+".log"))
	if err != nil {
		return err
	}
	p.cmd = exec.Command(p.args[0], p.args[1:]...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		return err
	}
	p.done = make(chan struct{})
	go func() {
		p.err = p.cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) signal(sig syscall.Signal) {
	if p != nil && p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(sig)
	}
}

func (p *proc) kill() {
	p.signal(syscall.SIGKILL)
	<-p.done
}

func (h *harness) stopAll() {
	for _, p := range h.runtimes {
		p.signal(syscall.SIGCONT)
		p.kill()
	}
	for _, n := range h.nodes {
		if n != nil && n.cmd != nil && !n.exited() {
			n.kill()
		}
	}
	if h.nc != nil {
		h.nc.Close()
	}
}

var (
	clientPorts = [3]int{24222, 24223, 24224}
	routePorts  = [3]int{26222, 26223, 26224}
)

func servers() string {
	var s []string
	for _, p := range clientPorts {
		s = append(s, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	return strings.Join(s, ",")
}

func (h *harness) nodeProc(i int) *proc {
	var routes []string
	for _, p := range routePorts {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	return &proc{name: fmt.Sprintf("nats-n%d", i), args: []string{h.ns, "-js", "-sd", filepath.Join(h.dir, "nats", fmt.Sprintf("n%d", i)),
		"-n", fmt.Sprintf("n%d", i), "-a", "127.0.0.1", "-p", strconv.Itoa(clientPorts[i]),
		"--cluster_name", "gsaccept", "--cluster", fmt.Sprintf("nats://127.0.0.1:%d", routePorts[i]), "--routes", strings.Join(routes, ",")}}
}

// startRuntime starts a runtime on a new data directory, or on dataDir when given.
func (h *harness) startRuntime(id string) (*proc, error) {
	if id == "" {
		id = fmt.Sprintf("r%d", h.nextRT)
		h.nextRT++
	}
	n, _ := strconv.Atoi(strings.TrimPrefix(id, "r"))
	p := &proc{name: "runtime-" + id, dataDir: filepath.Join(h.dir, id), metrics: fmt.Sprintf("127.0.0.1:%d", 29100+n)}
	p.args = []string{h.gs, "serve", "--id", id, "--data", p.dataDir, "--server", servers(), "--member-ttl", memberTTL.String(), "--metrics", p.metrics}
	if err := h.start(p); err != nil {
		return nil, err
	}
	h.runtimes[id] = p
	return p, nil
}

func (h *harness) run() error {
	h.runtimes = map[string]*proc{}
	h.say("building groupstate and nats-server into %s", h.dir)
	h.gs, h.ns = filepath.Join(h.dir, "groupstate"), filepath.Join(h.dir, "nats-server")
	for _, b := range [][]string{{"-o", h.gs, "./cmd/groupstate"}, {"-o", h.ns, "github.com/nats-io/nats-server/v2"}} {
		cmd := exec.Command("go", append([]string{"build"}, b...)...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go build %v: %w", b, err)
		}
	}
	h.say("starting a 3-node JetStream cluster on 127.0.0.1:%d-%d", clientPorts[0], clientPorts[2])
	for i := range h.nodes {
		h.nodes[i] = h.nodeProc(i)
		if err := h.start(h.nodes[i]); err != nil {
			return err
		}
	}
	var err error
	if h.nc, err = nats.Connect(servers(), nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond)); err != nil {
		return err
	}
	// A publish whose server died never hears its ack: the timeout makes its future fail, and
	// the loader sends it again (its Nats-Msg-Id drops a copy that was stored).
	if h.js, err = jetstream.New(h.nc, jetstream.WithPublishAsyncTimeout(5*time.Second)); err != nil {
		return err
	}
	if err := until(30*time.Second, "the cluster has a JetStream meta leader", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := h.js.AccountInfo(ctx)
		return err == nil
	}); err != nil {
		return err
	}
	// The client creates replicated buckets, which a cluster whose peers are not all known
	// yet refuses ("no suitable peers for placement"): try until it is ready.
	var last error
	if err := until(30*time.Second, "the cluster to place replicated buckets", func() bool {
		h.cli, last = client.New(context.Background(), h.nc)
		return last == nil
	}); err != nil {
		return fmt.Errorf("%w: %w", err, last)
	}
	h.say("starting 3 runtimes (member TTL %s)", *memberTTL)
	for range 3 {
		if _, err := h.startRuntime(""); err != nil {
			return err
		}
	}
	if err := h.deploy(); err != nil {
		return err
	}
	steps := []struct {
		n   int
		run func() error
	}{
		{1, h.checkPlacement}, {2, h.checkCrash}, {4, h.checkScaleOut}, {5, h.checkScaleIn},
		{6, h.checkZombie}, {7, h.checkNodeLoss}, {9, h.checkBounds}, {8, h.checkDiskLoss}, {10, h.checkCost},
	}
	for _, s := range steps {
		if !h.checks[s.n] && !(s.n == 2 && h.checks[3]) {
			continue
		}
		if err := s.run(); err != nil {
			return fmt.Errorf("check %d: %w", s.n, err)
		}
	}
	return nil
}

func (h *harness) deploy() error {
	yaml := fmt.Sprintf(`name: %s
input:
  subjects: ["counts.>"]
key:
  field: key
timeout: none
output:
  subject: counter.out
  stream: %s
on_error: dead_letter
replication: changelog
partitions: %d
standbys: %d
`, deployment, outStream, *partsFlag, *standbys)
	if h.checks[9] {
		yaml += "snapshot:\n  interval: 1m\n"
	}
	sp, err := spec.ParseSpec([]byte(yaml))
	if err != nil {
		return err
	}
	wasm, err := os.ReadFile("samples/counter/go/counter.wasm")
	if err != nil {
		return fmt.Errorf("run it from the repository's root: %w", err)
	}
	h.say("deploying %s: %d partitions, replication: changelog, standbys: %d", deployment, *partsFlag, *standbys)
	if _, err := h.cli.Deploy(context.Background(), sp, wasm); err != nil {
		return err
	}
	_, err = h.waitPlaced(2*time.Minute, func(st *client.Status) bool { return true })
	return err
}

// status returns the deployment's status, or nil while it cannot be read.
func (h *harness) status() *client.Status {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	st, err := h.cli.Status(ctx, deployment)
	if err != nil {
		return nil
	}
	return st
}

// waitPlaced waits until every partition runs on a live runtime with its standbys, and ok
// holds.
func (h *harness) waitPlaced(within time.Duration, ok func(*client.Status) bool) (*client.Status, error) {
	var st *client.Status
	err := until(within, "every partition running with its standbys", func() bool {
		st = h.status()
		if st == nil || st.State != client.StatusRunning || len(st.Partitions) != *partsFlag {
			return false
		}
		live := 0
		for _, r := range h.runtimes {
			if !r.exited() {
				live++
			}
		}
		for _, p := range st.Partitions {
			// Standbys need other runtimes: with fewer, as many as there are.
			missing := p.MissingStandbys > 0 && len(p.Standbys) < min(*standbys, live-1)
			if r := h.runtimes[p.Owner]; r == nil || r.exited() || missing {
				return false
			}
		}
		return ok(st)
	})
	return st, err
}

func owners(st *client.Status) map[int]string {
	out := map[int]string{}
	for _, p := range st.Partitions {
		out[p.Partition] = p.Owner
	}
	return out
}

// leaseOwners reads who holds each partition's lease now (the bucket groupstate-leases:
// key "<deployment>.<partition>", value {"owner": id}).
func (h *harness) leaseOwners() (map[int]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := h.js.KeyValue(ctx, "groupstate-leases")
	if err != nil {
		return nil, fmt.Errorf("the leases bucket: %w", err)
	}
	out := map[int]string{}
	for p := range *partsFlag {
		e, err := kv.Get(ctx, fmt.Sprintf("%s.%d", deployment, p))
		if err != nil {
			return nil, fmt.Errorf("the lease of partition %d: %w", p, err)
		}
		var v struct {
			Owner string `json:"owner"`
		}
		if err := json.Unmarshal(e.Value(), &v); err != nil {
			return nil, fmt.Errorf("the lease of partition %d: %w", p, err)
		}
		out[p] = v.Owner
	}
	return out, nil
}

func perRuntime(st *client.Status) map[string]int {
	out := map[string]int{}
	for _, p := range st.Partitions {
		out[p.Owner]++
	}
	return out
}

// 1. Placement.
func (h *harness) checkPlacement() error {
	st, err := h.waitPlaced(time.Minute, func(*client.Status) bool { return true })
	if err != nil {
		return err
	}
	counts := perRuntime(st)
	lo, hi := (*partsFlag)/len(h.runtimes), (*partsFlag+len(h.runtimes)-1)/len(h.runtimes)
	for id, n := range counts {
		if n < lo-1 || n > hi {
			return fmt.Errorf("runtime %s owns %d partitions, want %d to %d: %v", id, n, lo-1, hi, counts)
		}
	}
	for _, p := range st.Partitions {
		if slices.Contains(p.Standbys, p.Owner) || len(p.Standbys) != min(*standbys, len(h.runtimes)-1) {
			return fmt.Errorf("partition %d: owner %s, standbys %v", p.Partition, p.Owner, p.Standbys)
		}
	}
	h.result("1 placement: partitions per runtime %v, every partition with %d standby(s) on another runtime: PASS", counts, *standbys)
	return nil
}

// loader publishes rows at -rate until n more are acknowledged, in the background; wait
// returns once they are.
type loader struct {
	done chan error
}

func (h *harness) load(n int) *loader {
	l := &loader{done: make(chan error, 1)}
	go func() { l.done <- h.publish(n) }()
	return l
}

func (l *loader) wait() error { return <-l.done }

func keyOf(row int64) string { return fmt.Sprintf("k%04d", (row*7919)%int64(*keysFlag)) }

// publish publishes rows published+1 .. published+n, each with its row number as message id
// (a retry after a lost acknowledgement is dropped as a duplicate), a tick's worth every
// 10 ms without waiting for the acknowledgements, which are collected as they come; a row
// whose publish failed is published again. published is the last row acknowledged with
// every row before it.
func (h *harness) publish(n int) error {
	type pending struct {
		row int64
		f   jetstream.PubAckFuture
	}
	send := func(row int64) (pending, error) {
		f, err := h.js.PublishMsgAsync(&nats.Msg{Subject: inSubject, Data: []byte(`{"key":"` + keyOf(row) + `"}`),
			Header: nats.Header{jetstream.MsgIDHeader: []string{"row-" + strconv.FormatInt(row, 10)}}})
		return pending{row, f}, err
	}
	next := h.published.Load() + 1
	last := next + int64(n) - 1
	perTick := max(1, *rateFlag/100)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var queue []pending
	for next <= last || len(queue) > 0 {
		<-tick.C
		for i := 0; i < perTick && next <= last; i++ {
			p, err := send(next)
			if err != nil {
				break // too many in flight, or reconnecting: the next tick goes on
			}
			queue = append(queue, p)
			next++
		}
		for len(queue) > 0 {
			select {
			case <-queue[0].f.Ok():
				h.published.Store(queue[0].row)
				queue = queue[1:]
				continue
			case <-queue[0].f.Err():
				if p, err := send(queue[0].row); err == nil {
					queue[0] = p
				}
			default:
			}
			break
		}
	}
	return nil
}

// outputs reads the whole output stream: each key's n in stream order, and each partition's
// output times.
type outputs struct {
	byKey  map[string][]int64
	byPart map[int][]time.Time
	total  int
}

func (h *harness) readOutputs() (*outputs, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := h.js.Stream(ctx, outStream)
	if err != nil {
		return nil, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, err
	}
	o := &outputs{byKey: map[string][]int64{}, byPart: map[int][]time.Time{}}
	if info.State.Msgs == 0 {
		return o, nil
	}
	c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, err
	}
	for uint64(o.total) < info.State.Msgs {
		batch, err := c.FetchNoWait(4096)
		if err != nil {
			return nil, err
		}
		got := 0
		for m := range batch.Messages() {
			got++
			o.total++
			key, n, ok := parseOutput(m.Data())
			if !ok {
				return nil, fmt.Errorf("output %q is not {key, n}", m.Data())
			}
			o.byKey[key] = append(o.byKey[key], n)
			if md, err := m.Metadata(); err == nil {
				p := partitionOfID(m.Headers().Get(jetstream.MsgIDHeader))
				o.byPart[p] = append(o.byPart[p], md.Timestamp)
			}
		}
		if got == 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	return o, nil
}

// parseOutput reads {"key":"kNNNN","n":N}.
func parseOutput(b []byte) (string, int64, bool) {
	s := string(b)
	k1 := strings.Index(s, `"key":"`)
	n1 := strings.Index(s, `"n":`)
	if k1 < 0 || n1 < 0 {
		return "", 0, false
	}
	rest := s[k1+7:]
	key := rest[:strings.IndexByte(rest, '"')]
	num := strings.TrimRight(s[n1+4:], "}")
	n, err := strconv.ParseInt(num, 10, 64)
	return key, n, err == nil
}

// partitionOfID is the partition of an output message id <name>.<lineage>.<p>.<batch>.<seq>.
func partitionOfID(id string) int {
	t := strings.Split(id, ".")
	if len(t) < 5 {
		return 0
	}
	p, _ := strconv.Atoi(t[len(t)-3])
	return p
}

// expected is each key's row count after rows 1..n.
func expected(n int64) map[string]int64 {
	out := map[string]int64{}
	for i := int64(1); i <= n; i++ {
		out[keyOf(i)]++
	}
	return out
}

// verify waits until the outputs cover every published row, then requires each key's
// outputs to be exactly 1..c and the state to hold c for a sample of keys (all with full).
func (h *harness) verify(what string, full bool) (*outputs, error) {
	want := expected(h.published.Load())
	total := int64(0)
	for _, c := range want {
		total += c
	}
	var o *outputs
	err := until(3*time.Minute, fmt.Sprintf("%d outputs", total), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		s, err := h.js.Stream(ctx, outStream)
		if err != nil {
			return false
		}
		info, err := s.Info(ctx)
		return err == nil && int64(info.State.Msgs) >= total
	})
	if err != nil {
		return nil, err
	}
	if o, err = h.readOutputs(); err != nil {
		return nil, err
	}
	for key, c := range want {
		got := o.byKey[key]
		if int64(len(got)) != c {
			return o, fmt.Errorf("%s: key %s has %d outputs, want %d", what, key, len(got), c)
		}
		for i, n := range got {
			if n != int64(i+1) {
				return o, fmt.Errorf("%s: key %s's output %d is n=%d, want %d (a gap or a repeat)", what, key, i+1, n, i+1)
			}
		}
	}
	if len(o.byKey) != len(want) {
		return o, fmt.Errorf("%s: outputs for %d keys, want %d", what, len(o.byKey), len(want))
	}
	checked := 0
	for key, c := range want {
		if !full && checked >= 50 {
			break
		}
		checked++
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ks, found, err := h.cli.State(ctx, deployment, []byte(strconv.Quote(key)))
		cancel()
		if err != nil || !found || string(ks.Value) != fmt.Sprintf(`{"n":%d}`, c) {
			return o, fmt.Errorf("%s: state of %s: %v found=%v err=%v, want {\"n\":%d}", what, key, stateValue(ks), found, err, c)
		}
	}
	h.say("%s: %d rows, %d keys, every key's outputs exactly 1..c, state of %d keys = c", what, total, len(want), checked)
	return o, nil
}

func stateValue(ks *client.KeyState) string {
	if ks == nil {
		return "<none>"
	}
	return string(ks.Value)
}

// gapAfter is, for partition p, the time from t to its first output after t.
func (o *outputs) gapAfter(p int, t time.Time) (time.Duration, bool) {
	for _, at := range o.byPart[p] {
		if at.After(t) {
			return at.Sub(t), true
		}
	}
	return 0, false
}

// maxGap is partition p's longest time without an output within [from, to].
func (o *outputs) maxGap(p int, from, to time.Time) time.Duration {
	var longest time.Duration
	prev := from
	for _, at := range o.byPart[p] {
		if at.Before(from) {
			continue
		}
		if at.After(to) {
			break
		}
		longest = max(longest, at.Sub(prev))
		prev = at
	}
	return longest
}

func (h *harness) liveRuntime(except ...string) *proc {
	ids := make([]string, 0, len(h.runtimes))
	for id := range h.runtimes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if !slices.Contains(except, id) && !h.runtimes[id].exited() {
			return h.runtimes[id]
		}
	}
	return nil
}

func idOf(p *proc) string { return strings.TrimPrefix(p.name, "runtime-") }

// 2 and 3. Crash: rows at the rate, kill -9 of a runtime at 30% (restarted), of another at
// 60%; failover time from each kill to the first output of each orphaned partition.
func (h *harness) checkCrash() error {
	n := *rowsFlag
	h.say("check 2: %d rows at %d/s; kill -9 of a runtime at 30%%, restarted, of another at 60%%", n, *rateFlag)
	start := h.published.Load()
	l := h.load(n)
	type kill struct {
		at       time.Time
		orphaned []int
		id       string
	}
	var kills []kill
	for i, frac := range []float64{0.3, 0.6} {
		if err := until(10*time.Minute, fmt.Sprintf("%.0f%% published", frac*100), func() bool {
			return h.published.Load()-start >= int64(frac*float64(n))
		}); err != nil {
			return err
		}
		// The victim and its partitions by the leases, not by the status (a status written
		// before a recent move names the former owner).
		held, err := h.leaseOwners()
		if err != nil {
			return err
		}
		victim := h.runtimes[held[i%len(held)]]
		if victim == nil {
			return fmt.Errorf("partition %d's lease holder %q is not a runtime of this run", i%len(held), held[i%len(held)])
		}
		var orphaned []int
		for p, o := range held {
			if o == idOf(victim) {
				orphaned = append(orphaned, p)
			}
		}
		slices.Sort(orphaned)
		h.say("kill -9 of %s, owner of partitions %v", idOf(victim), orphaned)
		at := time.Now()
		victim.kill()
		kills = append(kills, kill{at: at, orphaned: orphaned, id: idOf(victim)})
		if i == 0 {
			time.Sleep(5 * time.Second)
			h.say("restarting %s on its data directory", idOf(victim))
			if _, err := h.startRuntime(idOf(victim)); err != nil {
				return err
			}
		}
	}
	if err := l.wait(); err != nil {
		return err
	}
	o, err := h.verify("check 2", true)
	if err != nil {
		return err
	}
	h.result("2 crash: %d rows at %d/s, kill -9 at 30%% (restarted 5 s later) and at 60%%: every key exactly 1..c, state = c: PASS", n, *rateFlag)
	var worst time.Duration
	var each []string
	for _, k := range kills {
		for _, p := range k.orphaned {
			if _, ok := o.gapAfter(p, k.at); !ok {
				return fmt.Errorf("partition %d has no output after the kill of %s", p, k.id)
			}
			// The longest gap from the kill on: outputs of the victim's last batch may be
			// stored just after the kill, and then the gap that counts starts at them.
			d := o.maxGap(p, k.at, k.at.Add(failoverWindow))
			worst = max(worst, d)
			each = append(each, fmt.Sprintf("p%d %.1fs", p, d.Seconds()))
		}
	}
	verdict := "PASS"
	if worst > 10*time.Second {
		verdict = "FAIL"
	}
	h.result("3 failover (longest output gap of each orphaned partition from the kill on, member TTL %s): max %.1fs [%s]: %s", *memberTTL, worst.Seconds(), strings.Join(each, ", "), verdict)
	if worst > 10*time.Second {
		return fmt.Errorf("failover took %s", worst)
	}
	// The second victim comes back too, on its data directory, so that the next checks start
	// with three runtimes (check 4 adds a fourth); then wait for every partition and standby.
	last := kills[len(kills)-1].id
	h.say("restarting %s on its data directory", last)
	if _, err := h.startRuntime(last); err != nil {
		return err
	}
	// It is given partitions back (handed over once its copies are warm): wait for that, so
	// that no partition moves between these three during check 4.
	live := 0
	for _, p := range h.runtimes {
		if !p.exited() {
			live++
		}
	}
	// The plan is sticky: the others keep up to ceil(partitions/live) each, it gets the rest.
	least := *partsFlag - (live-1)*((*partsFlag+live-1)/live)
	_, err = h.waitPlaced(2*time.Minute, func(st *client.Status) bool { return perRuntime(st)[last] >= least })
	return err
}

// failoverWindow is how long after a kill check 3 looks for an orphaned partition's longest
// gap in outputs: the takeover is over well within it.
const failoverWindow = 20 * time.Second

// movedPauses reports the longest output gap of each partition that changed owner between
// before and after, over [from, to], and fails above 2 s.
func (h *harness) movedPauses(check string, before, after map[int]string, from time.Time) error {
	o, err := h.verify(check, false)
	if err != nil {
		return err
	}
	to := time.Now()
	var worst time.Duration
	var each []string
	for p, was := range before {
		if after[p] == was {
			continue
		}
		g := o.maxGap(p, from, to)
		worst = max(worst, g)
		each = append(each, fmt.Sprintf("p%d %s->%s %.2fs", p, was, after[p], g.Seconds()))
	}
	verdict := "PASS"
	if worst > 2*time.Second {
		verdict = "FAIL"
	}
	h.result("%s: %d partitions moved, longest pause per moved partition %.2fs [%s]: every key exactly 1..c: %s", check, len(each), worst.Seconds(), strings.Join(each, ", "), verdict)
	if worst > 2*time.Second {
		return fmt.Errorf("a moved partition paused %s", worst)
	}
	return nil
}

// 4. Scale out: a runtime joins under load and takes its share; no partition moves between
// the others.
func (h *harness) checkScaleOut() error {
	st, err := h.waitPlaced(time.Minute, func(*client.Status) bool { return true })
	if err != nil {
		return err
	}
	before := owners(st)
	l := h.load(*rowsFlag / 5)
	time.Sleep(3 * time.Second)
	from := time.Now()
	p, err := h.startRuntime("")
	if err != nil {
		return err
	}
	share := *partsFlag / len(h.runtimes)
	h.say("check 4: %s joins under load; its share is %d partitions", idOf(p), share)
	st, err = h.waitPlaced(2*time.Minute, func(st *client.Status) bool { return perRuntime(st)[idOf(p)] >= share })
	if err != nil {
		return err
	}
	after := owners(st)
	for part, o := range after {
		if o != before[part] && o != idOf(p) {
			return fmt.Errorf("partition %d moved from %s to %s, not to the newcomer", part, before[part], o)
		}
	}
	if err := l.wait(); err != nil {
		return err
	}
	return h.movedPauses("4 scale out", before, after, from)
}

// 5. Scale in: SIGTERM of the newest runtime under load: it exits 0 within 30 s.
func (h *harness) checkScaleIn() error {
	st, err := h.waitPlaced(time.Minute, func(*client.Status) bool { return true })
	if err != nil {
		return err
	}
	before := owners(st)
	var newest *proc
	for _, p := range h.runtimes {
		if !p.exited() && (newest == nil || p.name > newest.name) {
			newest = p
		}
	}
	l := h.load(*rowsFlag / 5)
	time.Sleep(3 * time.Second)
	h.say("check 5: SIGTERM of %s under load", idOf(newest))
	from := time.Now()
	newest.signal(syscall.SIGTERM)
	select {
	case <-newest.done:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%s did not exit within 30 s of SIGTERM", idOf(newest))
	}
	took := time.Since(from)
	if newest.err != nil {
		return fmt.Errorf("%s exited with %v after SIGTERM", idOf(newest), newest.err)
	}
	delete(h.runtimes, idOf(newest))
	st, err = h.waitPlaced(time.Minute, func(*client.Status) bool { return true })
	if err != nil {
		return err
	}
	if err := l.wait(); err != nil {
		return err
	}
	h.result("5 scale in: %s exited 0 %.1fs after SIGTERM", idOf(newest), took.Seconds())
	return h.movedPauses("5 scale in", before, owners(st), from)
}

// 6. Zombie: SIGSTOP of a runtime for 15 s; its partitions move; after SIGCONT it is fenced
// and harmless.
func (h *harness) checkZombie() error {
	if _, err := h.waitPlaced(time.Minute, func(*client.Status) bool { return true }); err != nil {
		return err
	}
	held, err := h.leaseOwners()
	if err != nil {
		return err
	}
	victim := h.runtimes[held[0]]
	if victim == nil {
		return fmt.Errorf("partition 0's lease holder %q is not a runtime of this run", held[0])
	}
	l := h.load(*rowsFlag / 5)
	time.Sleep(2 * time.Second)
	h.say("check 6: SIGSTOP of %s for 15 s under load", idOf(victim))
	stopped := time.Now()
	victim.signal(syscall.SIGSTOP)
	moved := until(15*time.Second, "its partitions moved", func() bool {
		st := h.status()
		return st != nil && perRuntime(st)[idOf(victim)] == 0
	}) == nil
	time.Sleep(time.Until(stopped.Add(15 * time.Second)))
	victim.signal(syscall.SIGCONT)
	h.say("SIGCONT of %s (its partitions had moved: %v)", idOf(victim), moved)
	if err := l.wait(); err != nil {
		return err
	}
	if _, err := h.waitPlaced(time.Minute, func(*client.Status) bool { return true }); err != nil {
		return err
	}
	if _, err := h.verify("check 6", false); err != nil {
		return err
	}
	fenced := h.metric(victim, "groupstate_fenced_total")
	h.result("6 zombie: %s stopped 15 s, partitions moved meanwhile: %v, fenced after SIGCONT (groupstate_fenced_total %s), every key exactly 1..c: PASS", idOf(victim), moved, fenced)
	return nil
}

// metric returns the sum of a metric's series on a runtime's /metrics, as text.
func (h *harness) metric(p *proc, name string) string {
	resp, err := http.Get("http://" + p.metrics + "/metrics")
	if err != nil {
		return "unread: " + err.Error()
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return "unread: " + err.Error()
	}
	sum := 0.0
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return strconv.FormatFloat(sum, 'f', -1, 64)
}

// 7. NATS node loss: kill -9 of the node leading the changelog stream, restarted 20 s later.
func (h *harness) checkNodeLoss() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	s, err := h.js.Stream(ctx, "GS_COUNTER_CL")
	var leader string
	if err == nil {
		var info *jetstream.StreamInfo
		if info, err = s.Info(ctx); err == nil && info.Cluster != nil {
			leader = info.Cluster.Leader
		}
	}
	cancel()
	if err != nil || leader == "" {
		return fmt.Errorf("the changelog stream's leader: %q, %v", leader, err)
	}
	i, _ := strconv.Atoi(strings.TrimPrefix(leader, "n"))
	l := h.load(*rowsFlag / 5)
	time.Sleep(2 * time.Second)
	h.say("check 7: kill -9 of NATS node %s (the changelog's leader) under load, restarted 20 s later", leader)
	h.nodes[i].kill()
	time.Sleep(20 * time.Second)
	h.nodes[i] = h.nodeProc(i)
	if err := h.start(h.nodes[i]); err != nil {
		return err
	}
	if err := l.wait(); err != nil {
		return err
	}
	if _, err := h.verify("check 7", false); err != nil {
		return err
	}
	for id, p := range h.runtimes {
		if p.exited() {
			return fmt.Errorf("runtime %s exited: %v", id, p.err)
		}
	}
	h.result("7 NATS node loss: node %s (changelog leader) killed, restarted 20 s later: no runtime exited, every key exactly 1..c: PASS", leader)
	return nil
}

// 9. Bounds: over 15 minutes with snapshot.interval 1m the changelog holds at most two
// intervals of records (the records appended in any two minutes, measured from the stream's
// last sequence), and later snapshots upload only what is new (the runtimes' counters of
// snapshot bytes uploaded and reused).
func (h *harness) checkBounds() error {
	h.say("check 9: 15 minutes of load at %d/s, snapshot.interval 1m", *rateFlag/5)
	rate := *rateFlag
	*rateFlag = rate / 5
	defer func() { *rateFlag = rate }()
	l := h.load(*rateFlag * 15 * 60)
	type sample struct {
		at        time.Time
		last, msg uint64
	}
	var samples []sample
	for end := time.Now().Add(15 * time.Minute); time.Now().Before(end); time.Sleep(10 * time.Second) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s, err := h.js.Stream(ctx, "GS_COUNTER_CL")
		if err == nil {
			if info, err := s.Info(ctx); err == nil {
				samples = append(samples, sample{time.Now(), info.State.LastSeq, info.State.Msgs})
			}
		}
		cancel()
	}
	if err := l.wait(); err != nil {
		return err
	}
	if _, err := h.verify("check 9", false); err != nil {
		return err
	}
	// The most records held, against the most appended within any two minutes (two
	// intervals), from the third minute on (the first snapshots are taken after a minute).
	var most, twoIntervals uint64
	for i, s := range samples {
		for _, t := range samples[:i] {
			if s.at.Sub(t.at) <= 2*time.Minute+5*time.Second {
				twoIntervals = max(twoIntervals, s.last-t.last)
			}
		}
		if s.at.Sub(samples[0].at) >= 3*time.Minute {
			most = max(most, s.msg)
		}
	}
	verdict := "PASS"
	if most > twoIntervals+twoIntervals/10 { // a snapshot takes a while: 10% slack
		verdict = "FAIL"
	}
	uploads, err := h.snapshotUploads()
	if err != nil {
		return err
	}
	h.result("9 bounds: over 15 minutes at %d rows/s the changelog held at most %d records (all partitions) after the third minute; the most appended in two minutes was %d: %s; the snapshots kept %s",
		*rateFlag, most, twoIntervals, verdict, uploads)
	if verdict != "PASS" {
		return fmt.Errorf("the changelog held %d records, more than two intervals' %d", most, twoIntervals)
	}
	return nil
}

// snapshotUploads sums what the snapshots kept in the bucket groupstate-snapshots hold and
// what each one's upload stored, from their manifests ("<deployment>/<p>/<id>.json").
func (h *harness) snapshotUploads() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	obs, err := h.js.ObjectStore(ctx, "groupstate-snapshots")
	if err != nil {
		return "", fmt.Errorf("the snapshots bucket: %w", err)
	}
	infos, err := obs.List(ctx)
	if err != nil {
		return "", fmt.Errorf("listing the snapshots: %w", err)
	}
	var n, chunks, uploadedChunks int
	var stored, uploaded int64
	for _, info := range infos {
		if !strings.HasPrefix(info.Name, deployment+"/") || !strings.HasSuffix(info.Name, ".json") {
			continue
		}
		body, err := obs.GetBytes(ctx, info.Name)
		if err != nil {
			continue // pruned since the listing
		}
		var m struct {
			Chunks         int   `json:"chunks"`
			StoredBytes    int64 `json:"stored_bytes"`
			UploadedChunks int   `json:"uploaded_chunks"`
			UploadedBytes  int64 `json:"uploaded_bytes"`
		}
		if err := json.Unmarshal(body, &m); err != nil {
			return "", fmt.Errorf("snapshot manifest %s: %w", info.Name, err)
		}
		n++
		chunks += m.Chunks
		uploadedChunks += m.UploadedChunks
		stored += m.StoredBytes
		uploaded += m.UploadedBytes
	}
	return fmt.Sprintf("%d snapshots of %d chunks (%d bytes stored); their uploads stored %d chunks (%d bytes), the rest were already in the bucket", n, chunks, stored, uploadedChunks, uploaded), nil
}

// 8. Disk loss: every runtime stops, every data directory is deleted, one runtime starts:
// every partition is restored from the snapshots and the log, state and outputs unchanged.
func (h *harness) checkDiskLoss() error {
	before, err := h.verify("check 8 (before)", false)
	if err != nil {
		return err
	}
	h.say("check 8: SIGTERM of every runtime, every data directory deleted, one runtime started")
	for id, p := range h.runtimes {
		p.signal(syscall.SIGTERM)
		<-p.done
		os.RemoveAll(p.dataDir)
		delete(h.runtimes, id)
	}
	start := time.Now()
	p, err := h.startRuntime("")
	if err != nil {
		return err
	}
	restoreMax := 5 * time.Minute
	if _, err := h.waitPlaced(restoreMax, func(st *client.Status) bool { return perRuntime(st)[idOf(p)] == *partsFlag }); err != nil {
		return err
	}
	took := time.Since(start)
	after, err := h.verify("check 8 (after)", true)
	if err != nil {
		return err
	}
	if after.total != before.total {
		return fmt.Errorf("the output stream went from %d to %d messages", before.total, after.total)
	}
	h.result("8 disk loss: every data directory deleted; one runtime restored all %d partitions in %.1fs; state = c for every key, output stream unchanged (%d messages): PASS", *partsFlag, took.Seconds(), after.total)
	return nil
}

// 10. Cost: one runtime on the cluster, the same rows through replication: none and
// replication: changelog (one partition each), preloaded, timed from the deploy to the last
// output.
func (h *harness) checkCost() error {
	rt := h.liveRuntime()
	if rt == nil {
		return errors.New("no runtime")
	}
	for id, p := range h.runtimes {
		if p != rt {
			p.signal(syscall.SIGTERM)
			<-p.done
			delete(h.runtimes, id)
		}
	}
	n := *rowsFlag / 3
	rates := map[string]float64{}
	for _, repl := range []string{"none", "changelog"} {
		name := "cost" + repl
		subj := name + ".in"
		h.say("check 10: %d rows preloaded on %s, then deployed with replication: %s on one runtime", n, subj, repl)
		for i := 0; i < n; {
			var futures []jetstream.PubAckFuture
			for j := 0; j < 1000 && i < n; j, i = j+1, i+1 {
				if i == 0 {
					if _, err := h.js.CreateOrUpdateStream(context.Background(), jetstream.StreamConfig{Name: strings.ToUpper(name) + "_IN", Subjects: []string{subj}, Replicas: 3}); err != nil {
						return err
					}
				}
				f, err := h.js.PublishAsync(subj, []byte(`{"key":"`+keyOf(int64(i))+`"}`))
				if err != nil {
					return err
				}
				futures = append(futures, f)
			}
			for _, f := range futures {
				select {
				case <-f.Ok():
				case err := <-f.Err():
					return err
				}
			}
		}
		yaml := fmt.Sprintf("name: %s\ninput:\n  subjects: [\"%s\"]\n  stream: %s_IN\nkey:\n  field: key\ntimeout: none\noutput:\n  subject: %s.out\n  stream: %s_OUT\nreplication: %s\n",
			name, subj, strings.ToUpper(name), name, strings.ToUpper(name), repl)
		sp, err := spec.ParseSpec([]byte(yaml))
		if err != nil {
			return err
		}
		wasm, err := os.ReadFile("samples/counter/go/counter.wasm")
		if err != nil {
			return err
		}
		start := time.Now()
		if _, err := h.cli.Deploy(context.Background(), sp, wasm); err != nil {
			return err
		}
		if err := until(10*time.Minute, name+" caught up", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			s, err := h.js.Stream(ctx, strings.ToUpper(name)+"_OUT")
			if err != nil {
				return false
			}
			info, err := s.Info(ctx)
			return err == nil && info.State.Msgs >= uint64(n)
		}); err != nil {
			return err
		}
		rates[repl] = float64(n) / time.Since(start).Seconds()
	}
	ratio := rates["changelog"] / rates["none"]
	verdict := "PASS"
	if ratio < 0.5 {
		verdict = "FAIL"
	}
	h.result("10 cost: one runtime, %d rows preloaded, deploy to last output: replication none %.0f rows/s, changelog %.0f rows/s, ratio %.2f: %s", n, rates["none"], rates["changelog"], ratio, verdict)
	return nil
}

// until polls ok every 100 ms until it holds or within passed.
func until(within time.Duration, what string, ok func() bool) error {
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}
