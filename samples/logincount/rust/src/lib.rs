//! logincount, the running example of Spark's applyInPandasWithState, in Rust: counts each
//! user's logins and closes the session after config.idle_timeout of processing time without
//! logins. Same behaviour, state and output as ../go/main.go.
//!
//! Build (from the repository root; `make samples-rust` runs exactly this):
//!
//!     /usr/bin/rustc --edition 2021 --target wasm32-wasi --crate-type=rlib --crate-name groupstate \
//!         -C opt-level=s -C debuginfo=0 -C strip=symbols -C panic=abort -C metadata=groupstate \
//!         --remap-path-prefix=$PWD=. -o sdk/rust/target/wasm32-wasi/libgroupstate.rlib sdk/rust/src/lib.rs
//!     /usr/bin/rustc --edition 2021 --target wasm32-wasi --crate-type=cdylib --crate-name logincount \
//!         -C opt-level=s -C debuginfo=0 -C strip=symbols -C panic=abort -C lto=fat -C codegen-units=1 \
//!         --remap-path-prefix=$PWD=. -L sdk/rust/target/wasm32-wasi \
//!         --extern groupstate=sdk/rust/target/wasm32-wasi/libgroupstate.rlib \
//!         -o samples/logincount/rust/logincount.wasm samples/logincount/rust/src/lib.rs

use std::time::Duration;

use groupstate::json::{Object, ObjectWriter};
use groupstate::{Config, Emitter, Error, GroupState, Handler, Key, Rows};

struct LoginCount {
    idle_timeout: Option<Duration>, // config.idle_timeout
    w: ObjectWriter,                // scratch for output rows and the state
}

impl Handler for LoginCount {
    fn init(config: &Config) -> Result<Self, Error> {
        Ok(LoginCount { idle_timeout: config.duration("idle_timeout")?, w: ObjectWriter::new() })
    }

    fn handle(&mut self, key: &Key, rows: Rows, state: &mut GroupState, out: &mut Emitter) -> Result<(), Error> {
        // State {"login_count": n}.
        let mut count = match state.get_option() {
            Some(v) => Object::parse(v)?.i64("login_count")?.unwrap_or(0),
            None => 0,
        };
        if state.has_timed_out() {
            let row = self.w.clear().raw("user_id", key.json()).i64("total_logins", count);
            out.emit(row.bool("session_closed", true));
            state.remove();
            return Ok(());
        }
        count += rows.len() as i64;
        state.update(self.w.clear().i64("login_count", count))?;
        out.emit(self.w.clear().raw("user_id", key.json()).i64("total_logins", count));
        match self.idle_timeout {
            Some(d) if d > Duration::ZERO => state.set_timeout_duration(d),
            _ => Ok(()),
        }
    }
}

groupstate::export!(LoginCount);
