package procmem_test

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/groupstate/groupstate/runtime/internal/procmem"
)

// TestReadings: on Linux the readings are positive, the peak is at least the present size,
// and after ResetPeak a 64 MiB allocation that is touched shows in the peak.
func TestReadings(t *testing.T) {
	if runtime.GOOS != "linux" {
		if procmem.RSS() != 0 || procmem.ResetPeak() {
			t.Fatal("readings outside Linux")
		}
		return
	}
	rss := procmem.RSS()
	if peak := procmem.PeakRSS(); rss == 0 || peak < rss { // the peak, read after, is at least it
		t.Fatalf("RSS %d, peak %d", rss, peak)
	}
	debug.FreeOSMemory() // what an earlier run left resident is not this one's
	if !procmem.ResetPeak() {
		t.Fatal("ResetPeak failed on Linux")
	}
	before := procmem.PeakRSS()
	buf := make([]byte, 64<<20)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1
	}
	if rise := procmem.PeakRSS() - before; rise < 32<<20 {
		t.Fatalf("the peak rose by %d bytes after touching 64 MiB", rise)
	}
	runtime.KeepAlive(buf)
}
