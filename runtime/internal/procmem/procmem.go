// Package procmem reads the process's resident memory from Linux's /proc/self/status: the
// resident set size now and its peak, which ResetPeak sets back to the present. The
// benchmarks, the soak and the hostile-module tests report memory with it. Elsewhere (no
// /proc) every reading is 0 and ResetPeak reports false. Safe for concurrent use.
package procmem

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// RSS returns the process's resident set size in bytes (VmRSS), or 0 where it cannot be read.
func RSS() uint64 { return field("VmRSS") }

// PeakRSS returns the process's peak resident set size in bytes (VmHWM) since it started or
// since the last ResetPeak, or 0 where it cannot be read.
func PeakRSS() uint64 { return field("VmHWM") }

// ResetPeak sets the peak resident set size back to the present one (Linux's clear_refs), and
// reports whether it could.
func ResetPeak() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil && PeakRSS() > 0
}

// MB converts bytes to MiB, the unit the reports print.
func MB(bytes uint64) float64 { return float64(bytes) / (1 << 20) }

// field reads one "Name:   123 kB" line of /proc/self/status, in bytes.
func field(name string) uint64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name+":"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
