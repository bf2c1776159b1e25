//! sessions, event-time sessionization, in Rust: a user's events belong to one session until a
//! gap of more than config.gap of event time; a session is emitted when a later event opens the
//! next one, or when the watermark passes its end plus the gap. Same behaviour, state and output
//! as ../go/session/session.go.
//!
//! Build (from the repository root; `make samples-rust` runs exactly this):
//!
//!     /usr/bin/rustc --edition 2021 --target wasm32-wasi --crate-type=rlib --crate-name groupstate \
//!         -C opt-level=s -C debuginfo=0 -C strip=symbols -C panic=abort -C metadata=groupstate \
//!         --remap-path-prefix=$PWD=. -o sdk/rust/target/wasm32-wasi/libgroupstate.rlib sdk/rust/src/lib.rs
//!     /usr/bin/rustc --edition 2021 --target wasm32-wasi --crate-type=cdylib --crate-name sessions \
//!         -C opt-level=s -C debuginfo=0 -C strip=symbols -C panic=abort -C lto=fat -C codegen-units=1 \
//!         --remap-path-prefix=$PWD=. -L sdk/rust/target/wasm32-wasi \
//!         --extern groupstate=sdk/rust/target/wasm32-wasi/libgroupstate.rlib \
//!         -o samples/sessions/rust/sessions.wasm samples/sessions/rust/src/lib.rs

use groupstate::json::{Kind, Object, ObjectWriter, Value};
use groupstate::{time, Config, Emitter, Error, GroupState, Handler, Key, Rows};

/// The state of a user: the open session, stored as {"start", "end", "events"}.
#[derive(Clone, Copy)]
struct Session {
    start: i64,
    end: i64,
    events: i64,
}

struct Sessions {
    gap_ms: i64,      // config.gap in milliseconds (default 5s)
    ts: Vec<i64>,     // scratch: the event times of a call
    w: ObjectWriter,  // scratch: output rows and the state
}

impl Sessions {
    fn emit(&mut self, out: &mut Emitter, key: &Key, s: Session) {
        self.w.clear().raw("user_id", key.json());
        out.emit(self.w.i64("start", s.start).i64("end", s.end).i64("events", s.events));
    }
}

/// A row's event time `ts`: epoch milliseconds (a number, truncated) or an RFC 3339 string;
/// 0 when absent.
fn event_time(row: &[u8]) -> Result<i64, Error> {
    let v: Value = match Object::parse(row)?.get("ts") {
        None => return Ok(0),
        Some(v) => v,
    };
    match v.kind() {
        Kind::String => time::parse_rfc3339_ms(&v.as_str()?),
        Kind::Number => Ok(v.as_f64()? as i64),
        _ => Err(Error::msg(format!(
            "ts: want epoch milliseconds or an RFC 3339 string, got {}",
            String::from_utf8_lossy(v.raw())
        ))),
    }
}

impl Handler for Sessions {
    fn init(config: &Config) -> Result<Self, Error> {
        let mut gap_ms = 5000;
        if let Some(d) = config.duration("gap")? {
            if d.as_millis() == 0 {
                return Err("sessions: config.gap must be at least 1ms".into());
            }
            gap_ms = d.as_millis().min(i64::MAX as u128) as i64;
        }
        Ok(Sessions { gap_ms, ts: Vec::new(), w: ObjectWriter::new() })
    }

    fn handle(&mut self, key: &Key, rows: Rows, state: &mut GroupState, out: &mut Emitter) -> Result<(), Error> {
        let mut open = match state.get_option() {
            Some(v) => {
                let o = Object::parse(v)?;
                Some(Session {
                    start: o.i64("start")?.unwrap_or(0),
                    end: o.i64("end")?.unwrap_or(0),
                    events: o.i64("events")?.unwrap_or(0),
                })
            }
            None => None,
        };
        if state.has_timed_out() {
            if let Some(s) = open {
                self.emit(out, key, s);
            }
            state.remove();
            return Ok(());
        }
        self.ts.clear();
        for (i, row) in rows.enumerate() {
            let t = event_time(row).map_err(|e| Error::msg(format!("row {}: {}", i, e)))?;
            self.ts.push(t);
        }
        self.ts.sort_unstable();
        for i in 0..self.ts.len() {
            let t = self.ts[i];
            open = Some(match open {
                None => Session { start: t, end: t, events: 1 },
                Some(s) if t > s.end.wrapping_add(self.gap_ms) => {
                    self.emit(out, key, s);
                    Session { start: t, end: t, events: 1 }
                }
                Some(s) => Session { start: s.start.min(t), end: s.end.max(t), events: s.events + 1 },
            });
        }
        let s = match open {
            None => return Ok(()), // no rows (cannot happen on a data call) and no session
            Some(s) => s,
        };
        self.w.clear().i64("start", s.start).i64("end", s.end);
        state.update(self.w.i64("events", s.events))?;
        // Every row that reaches the handler is later than the watermark, so end + gap is too;
        // the clamp only guards a deployment without late-row filtering.
        let mut timeout = s.end.wrapping_add(self.gap_ms);
        if let Ok(w) = state.current_watermark_ms() {
            timeout = timeout.max(w);
        }
        state.set_timeout_timestamp(timeout)
    }
}

groupstate::export!(Sessions);
