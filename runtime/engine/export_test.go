package engine

// SetChunkLimits bounds the timeout calls of one commit to keys keys and stateBytes bytes
// (default TimeoutChunkKeys and TimeoutChunkBytes), so that tests cut batches into chunks
// with few keys.
func SetChunkLimits(cfg *Config, keys, stateBytes int) {
	cfg.chunkKeys, cfg.chunkBytes = keys, stateBytes
}
