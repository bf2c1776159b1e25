package engine

// SetChunkLimits bounds the timeout calls of one commit to keys keys and stateBytes bytes
// (default TimeoutChunkKeys and TimeoutChunkBytes), so that tests cut batches into chunks
// with few keys.
func SetChunkLimits(cfg *Config, keys, stateBytes int) {
	cfg.chunkKeys, cfg.chunkBytes = keys, stateBytes
}

// SameModule tells whether engines a and b run on one shared module (Config.ShareModule).
func SameModule(a, b *Engine) bool {
	ra, _ := a.h.(*moduleRef)
	rb, _ := b.h.(*moduleRef)
	return ra != nil && rb != nil && ra.m == rb.m
}
