# Builds the committed sample modules and runs the tests.
#
#   make samples   rebuild every samples/<name>/<language>/<name>.wasm from source
#   make fixtures  rebuild the .wasm test fixtures under runtime/engine/testdata
#   make test      go test ./...
#
# Each language has its own list of samples and its own pattern rule; to add a language, add
# a <LANG>_SAMPLES list, its module paths to SAMPLE_MODULES and a rule that builds them.

GO      ?= go
GOWASM  := GOOS=wasip1 GOARCH=wasm $(GO)

# Go samples: samples/<name>/go/<name>.wasm, built from samples/<name>/go.
GO_SAMPLES := logincount sessions dedup alerts carts adjoin
GO_MODULES := $(foreach s,$(GO_SAMPLES),samples/$(s)/go/$(s).wasm)

SAMPLE_MODULES := $(GO_MODULES)

# Other languages: each mk/<language>.mk adds its modules to SAMPLE_MODULES and its rules.
# They are included before the first target here, so name the default goal explicitly.
.DEFAULT_GOAL := all
include $(wildcard mk/*.mk)

# Test fixtures: Go handlers the runtime's tests load (runtime/engine/testdata/<name>/<name>.wasm).
FIXTURES := runtime/engine/testdata/probe/probe.wasm runtime/engine/testdata/v2probe/v2probe.wasm runtime/bench/testdata/v2count/v2count.wasm

.PHONY: all samples samples-go fixtures test clean-samples

all: samples test

samples: $(SAMPLE_MODULES)

samples-go: $(GO_MODULES)

# Always rebuilt (the go tool caches): the SDK and abi are dependencies too.
.PHONY: $(GO_MODULES)
$(GO_MODULES): samples/%.wasm:
	$(GOWASM) build -buildmode=c-shared -trimpath -buildvcs=false -o $@ ./$(dir $@)

# The Extism peer plugin of groupstate bench (C, no libc).
EXTISM_PLUGIN := runtime/bench/testdata/extism/logincount.wasm
FIXTURES += $(EXTISM_PLUGIN)

# The hostile-module corpus (runtime/internal/host/hostile): hand-assembled by a Go program.
HOSTILE_FIXTURES := runtime/internal/host/testdata/hostile
.PHONY: $(HOSTILE_FIXTURES)
$(HOSTILE_FIXTURES):
	$(GO) run ./runtime/internal/host/hostile/gen -dir $@

fixtures: $(FIXTURES) $(HOSTILE_FIXTURES)

.PHONY: $(EXTISM_PLUGIN)
$(EXTISM_PLUGIN):
	$(CLANG) --target=wasm32-unknown-unknown -nostdlib -O2 -g0 -Wl,--no-entry -Wl,--strip-all -o $@ $(@:.wasm=.c)

GO_FIXTURES := runtime/engine/testdata/probe/probe.wasm runtime/engine/testdata/v2probe/v2probe.wasm runtime/bench/testdata/v2count/v2count.wasm
.PHONY: $(GO_FIXTURES)
$(GO_FIXTURES):
	$(GOWASM) build -buildmode=c-shared -trimpath -buildvcs=false -o $@ ./$(dir $@)

test:
	$(GO) test ./...

clean-samples:
	rm -f $(SAMPLE_MODULES)
