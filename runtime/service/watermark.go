package service

import (
	"context"
	"fmt"

	"github.com/groupstate/groupstate/runtime/internal/cluster"
)

// The watermark of a deployment split into partitions under event_time (docs/semantics.md,
// "Event time across partitions"): each partition's runner publishes the partition's max
// event time to the groupstate-watermarks bucket (at most once a second, in the background),
// and bounds its engine's watermark by the other partitions' records, which one watch per
// runtime keeps in memory (cluster.Watermarks). A partition that gets no rows still runs a
// no-data batch when that bound moves its watermark (see loop), so its event-time timeouts
// fire.

// watermarks returns the runtime's view of the watermarks bucket, opening it (and its watch)
// the first time a runner needs it.
func (s *Service) watermarks(ctx context.Context) (*cluster.Watermarks, error) {
	s.wmMu.Lock()
	defer s.wmMu.Unlock()
	if s.wms != nil {
		return s.wms, nil
	}
	w, err := cluster.OpenWatermarks(ctx, s.js, cluster.WatermarkOptions{Replicas: s.cfg.Replicas, Now: s.cfg.Clock.Now, Logger: s.logger})
	if err != nil {
		return nil, fmt.Errorf("partition watermarks: %w", err)
	}
	s.wms = w
	return w, nil
}

// closeWatermarks stops the bucket's watch, once no runner runs.
func (s *Service) closeWatermarks() {
	s.wmMu.Lock()
	defer s.wmMu.Unlock()
	if s.wms != nil {
		s.wms.Close()
		s.wms = nil
	}
}
