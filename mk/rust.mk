# Rust samples: samples/<name>/rust/<name>.wasm, built from samples/<name>/rust/src/lib.rs with
# the dependency-free SDK in sdk/rust, by plain rustc (no cargo, no crates).
#
#   make samples-rust   rebuild the Rust sample modules (the ABI v2 ones against the v2 SDK)
#   make test-rust      run the Rust SDK's native unit tests (v1 and, with the feature v2, ABI v2),
#                       after building the ABI v2 example and a v1 sample against the v2-enabled
#                       SDK for wasm32-wasi (into sdk/rust/target), whose imports the tests check
#
# RUSTC must be a rustc with the wasm32-wasi target (Debian's /usr/bin/rustc 1.63 has it; the
# rustup rustc on PATH may not). A wasm32-wasi cdylib is a reactor: no _start, no _initialize.
# The flags make rebuilds byte-identical: no debug info, no symbols, relative paths only.

RUSTC        ?= /usr/bin/rustc
RUST_TARGET  := wasm32-wasi
RUST_FLAGS   := --edition 2021 --target $(RUST_TARGET) -C opt-level=s -C debuginfo=0 \
                -C strip=symbols -C panic=abort --remap-path-prefix=$(CURDIR)=.
RUST_SDK_DIR := sdk/rust/target/$(RUST_TARGET)
RUST_SDK     := $(RUST_SDK_DIR)/libgroupstate.rlib

RUST_SAMPLES := logincount sessions
RUST_MODULES := $(foreach s,$(RUST_SAMPLES),samples/$(s)/rust/$(s).wasm)

# ABI v2 (transformWithState) samples: built like the others, but against the SDK with the
# feature v2 (a separate rlib: the v1 samples' SDK compiles no v2 code, so their modules stay
# what they were).
RUST_V2_DIR             := sdk/rust/target/v2
RUST_SDK_V2             := $(RUST_V2_DIR)/libgroupstate.rlib
RUST_V2_SAMPLES         := carts adjoin
RUST_V2_SAMPLE_MODULES  := $(foreach s,$(RUST_V2_SAMPLES),samples/$(s)/rust/$(s).wasm)

SAMPLE_MODULES += $(RUST_MODULES) $(RUST_V2_SAMPLE_MODULES)

.PHONY: samples-rust test-rust rust-v2-modules $(RUST_SDK) $(RUST_MODULES) $(RUST_SDK_V2) $(RUST_V2_SAMPLE_MODULES)

samples-rust: $(RUST_MODULES) $(RUST_V2_SAMPLE_MODULES)

# Always rebuilt, like the Go modules: the SDK sources are dependencies too.
$(RUST_SDK):
	@mkdir -p $(RUST_SDK_DIR)
	$(RUSTC) $(RUST_FLAGS) --crate-type=rlib --crate-name groupstate -C metadata=groupstate \
		-o $@ sdk/rust/src/lib.rs

$(RUST_MODULES): samples/%.wasm: $(RUST_SDK)
	$(RUSTC) $(RUST_FLAGS) --crate-type=cdylib --crate-name $(notdir $*) -C lto=fat -C codegen-units=1 \
		-L $(RUST_SDK_DIR) --extern groupstate=$(RUST_SDK) -o $@ $(dir $@)src/lib.rs

# Always rebuilt, like the v1 SDK.
$(RUST_SDK_V2):
	@mkdir -p $(RUST_V2_DIR)
	$(RUSTC) $(RUST_FLAGS) --cfg 'feature="v2"' --crate-type=rlib --crate-name groupstate -C metadata=groupstate \
		-o $@ sdk/rust/src/lib.rs

$(RUST_V2_SAMPLE_MODULES): samples/%.wasm: $(RUST_SDK_V2)
	$(RUSTC) $(RUST_FLAGS) --crate-type=cdylib --crate-name $(notdir $*) -C lto=fat -C codegen-units=1 \
		-L $(RUST_V2_DIR) --extern groupstate=$(RUST_SDK_V2) -o $@ $(dir $@)src/lib.rs

# For test-rust, against the v2 SDK: the example processor sdk/rust/examples/pageviews and, to
# show that a v1 module of the v2-enabled SDK does not import groupstate.state, logincount.
# Not committed (they go to sdk/rust/target/v2).
RUST_V2_MODULES := $(RUST_V2_DIR)/pageviews.wasm $(RUST_V2_DIR)/logincount.wasm

rust-v2-modules: $(RUST_SDK_V2)
	$(RUSTC) $(RUST_FLAGS) --crate-type=cdylib --crate-name pageviews -C lto=fat -C codegen-units=1 \
		-L $(RUST_V2_DIR) --extern groupstate=$(RUST_SDK_V2) -o $(RUST_V2_DIR)/pageviews.wasm \
		sdk/rust/examples/pageviews/src/lib.rs
	$(RUSTC) $(RUST_FLAGS) --crate-type=cdylib --crate-name logincount -C lto=fat -C codegen-units=1 \
		-L $(RUST_V2_DIR) --extern groupstate=$(RUST_SDK_V2) -o $(RUST_V2_DIR)/logincount.wasm \
		samples/logincount/rust/src/lib.rs

test-rust: rust-v2-modules
	@mkdir -p sdk/rust/target/test
	$(RUSTC) --edition 2021 --test -o sdk/rust/target/test/groupstate sdk/rust/src/lib.rs
	sdk/rust/target/test/groupstate
	$(RUSTC) --edition 2021 --test --cfg 'feature="v2"' -o sdk/rust/target/test/groupstate-v2 sdk/rust/src/lib.rs
	GROUPSTATE_RUST_V2_MODULES=$(RUST_V2_DIR) sdk/rust/target/test/groupstate-v2
