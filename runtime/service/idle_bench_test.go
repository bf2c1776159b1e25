package service_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/groupstate/groupstate/runtime/client"
	"github.com/groupstate/groupstate/runtime/internal/procmem"
	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/runtime/service"
)

// idleWindow is how long BenchmarkIdle measures the idle runtime in each iteration.
const idleWindow = 5 * time.Second

// BenchmarkIdle measures what idle deployments cost (issue 30): it starts the embedded NATS
// server and a service in this process, deploys GS_IDLE_DEPLOYMENTS (default 10) logincount
// deployments (processing_time timeouts) that get no input, lets them settle (GS_IDLE_SETTLE,
// default 35 s: past the release of idle module instances), and measures
// the process's CPU time (getrusage: the service and the embedded server alike) over a window
// of idleWindow per iteration, and its memory after it. Run it alone, once:
//
//	GS_IDLE_DEPLOYMENTS=100 go test ./runtime/service/ -run '^$' -bench BenchmarkIdle -benchtime 1x
//
// Metrics: cpu-%/deployment and cpu-%-total (of one core), heap-MB (Go heap in use),
// rss-MB and rss-MB/deployment (the process's resident set, compiled modules included, after
// debug.FreeOSMemory),
// deploy-s/deployment (client deploy until running). GS_IDLE_CPUPROFILE=FILE writes a CPU
// profile of the measured windows, GS_IDLE_HEAPPROFILE=FILE a heap profile after them.
func BenchmarkIdle(b *testing.B) {
	n := 10
	if v := os.Getenv("GS_IDLE_DEPLOYMENTS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("GS_IDLE_DEPLOYMENTS=%q: want a positive number", v)
		}
	}
	ctx := context.Background()
	srv, err := service.StartEmbedded(service.EmbeddedOptions{DataDir: b.TempDir(), Port: -1, Logger: testutil.DiscardLogger()})
	testutil.Require(b, err)
	b.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	nc, err := service.Connect(service.ConnOptions{URL: srv.ClientURL(), Logger: testutil.DiscardLogger()})
	testutil.Require(b, err)
	b.Cleanup(nc.Close)
	c, err := client.New(ctx, nc, client.WithCacheDir(testutil.CompileCacheDir()))
	testutil.Require(b, err)
	b.Cleanup(func() { c.Close(ctx) })
	svc, err := service.New(ctx, service.Options{CacheDir: testutil.CompileCacheDir(), DataDir: b.TempDir(), Conn: nc, Logger: testutil.DiscardLogger()})
	testutil.Require(b, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- svc.Run(runCtx) }()
	b.Cleanup(func() { cancel(); <-done })

	wasm := logincountWasm(b)
	started := time.Now()
	for i := range n {
		_, err := c.Deploy(ctx, specFromYAML(b, idleSpec(i)), wasm)
		testutil.Require(b, err)
	}
	for i := range n {
		waitIdleRunning(b, c, fmt.Sprintf("idle%d", i))
	}
	deployS := time.Since(started).Seconds() / float64(n)
	// Idle long enough for the runners to release their module instances (runner's
	// instanceIdle, 30 s), unless GS_IDLE_SETTLE says otherwise.
	settle := 35 * time.Second
	if v := os.Getenv("GS_IDLE_SETTLE"); v != "" {
		var err error
		if settle, err = time.ParseDuration(v); err != nil {
			b.Fatalf("GS_IDLE_SETTLE=%q: %v", v, err)
		}
	}
	time.Sleep(settle)

	if path := os.Getenv("GS_IDLE_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		testutil.Require(b, err)
		testutil.Require(b, pprof.StartCPUProfile(f))
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	b.ResetTimer()
	var cpu, wall time.Duration
	for range b.N {
		c0, t0 := processCPU(b), time.Now()
		time.Sleep(idleWindow)
		cpu += processCPU(b) - c0
		wall += time.Since(t0)
	}
	b.StopTimer()
	debug.FreeOSMemory() // what an idle process converges to: freed memory returned to the OS
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rss := procmem.MB(procmem.RSS())
	if path := os.Getenv("GS_IDLE_HEAPPROFILE"); path != "" {
		f, err := os.Create(path)
		testutil.Require(b, err)
		testutil.Require(b, pprof.WriteHeapProfile(f))
		testutil.Require(b, f.Close())
	}
	share := 100 * cpu.Seconds() / wall.Seconds()
	b.ReportMetric(share/float64(n), "cpu-%/deployment")
	b.ReportMetric(share, "cpu-%-total")
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MB")
	b.ReportMetric(rss, "rss-MB")
	b.ReportMetric(rss/float64(n), "rss-MB/deployment")
	b.ReportMetric(deployS, "deploy-s/deployment")
	b.ReportMetric(0, "ns/op")
}

// idleSpec is the spec of idle deployment i: logincount under processing_time timeouts, on
// input subjects and output streams of its own.
func idleSpec(i int) string {
	return fmt.Sprintf(`
name: idle%[1]d
module: unused.wasm
input:
  subjects: ["idle%[1]d.in.>"]
key:
  field: user_id
timeout: processing_time
output:
  subject: idle%[1]d.out
  stream: IDLE%[1]d_OUT
config:
  idle_timeout: 10s
`, i)
}

// waitIdleRunning waits until deployment name runs.
func waitIdleRunning(tb testing.TB, c *client.Client, name string) {
	tb.Helper()
	deadline := time.Now().Add(compileDeadline)
	for {
		st, err := c.Status(context.Background(), name)
		if err == nil && st.State == client.StatusRunning {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s not running after %v: %+v, %v", name, compileDeadline, st, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// processCPU is the CPU time (user and system) the process used so far.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	testutil.Require(tb, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
