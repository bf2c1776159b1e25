//! carts, the transformWithState sample (ABI v2), in Rust: a shopping cart per user, with a map
//! of items, a list of recent events that expire by TTL, an abandon timer that every activity
//! moves and one reminder per cart. Same behaviour, state and output as ../go/main.go; see
//! ../README.md for the rules and the scenario that pins them down in every language.
//!
//! Build (from the repository root; `make samples-rust` runs exactly this): the SDK with the
//! feature v2, then the module against it.
//!
//!     /usr/bin/rustc --edition 2021 --target wasm32-wasi -C opt-level=s -C debuginfo=0 \
//!         -C strip=symbols -C panic=abort --remap-path-prefix=$PWD=. --cfg 'feature="v2"' \
//!         --crate-type=rlib --crate-name groupstate -C metadata=groupstate \
//!         -o sdk/rust/target/v2/libgroupstate.rlib sdk/rust/src/lib.rs
//!     /usr/bin/rustc --edition 2021 --target wasm32-wasi -C opt-level=s -C debuginfo=0 \
//!         -C strip=symbols -C panic=abort --remap-path-prefix=$PWD=. --crate-type=cdylib \
//!         --crate-name carts -C lto=fat -C codegen-units=1 -L sdk/rust/target/v2 \
//!         --extern groupstate=sdk/rust/target/v2/libgroupstate.rlib \
//!         -o samples/carts/rust/carts.wasm samples/carts/rust/src/lib.rs

use std::time::Duration;

use groupstate::json::{self, Kind, Object, ObjectWriter, Value};
use groupstate::{
    Config, Emitter, Error, InputRows, Key, ListState, MapState, ProcessorHandle, StateCodec, StatefulProcessor, Timers,
    ValueState,
};

/// An item of the cart, stored as {"qty", "price"}.
#[derive(Clone, Copy, Default)]
struct Line {
    qty: i64,
    price: f64,
}

impl StateCodec for Line {
    fn encode_json(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        if !self.price.is_finite() {
            return Err(Error::msg(format!("json: unsupported value: {}", self.price)));
        }
        let mut w = ObjectWriter::new();
        w.i64("qty", self.qty).f64("price", self.price);
        out.extend_from_slice(w.as_bytes());
        Ok(())
    }

    fn decode_json(b: &[u8]) -> Result<Self, Error> {
        let o = Object::parse(b)?;
        Ok(Line { qty: int64(&o, "qty")?, price: o.f64("price")?.unwrap_or(0.0) })
    }
}

/// Field `name` of `o` as Go's encoding/json decodes it into an int64: an integer literal in
/// range (not `2.0` or `1e3`); 0 when absent or null.
fn int64(o: &Object<'_>, name: &str) -> Result<i64, Error> {
    let v: Value = match o.get(name) {
        None => return Ok(0),
        Some(v) if v.is_null() => return Ok(0),
        Some(v) => v,
    };
    let raw = v.raw();
    match std::str::from_utf8(raw).ok().and_then(|s| s.parse::<i64>().ok()) {
        Some(n) if v.kind() == Kind::Number => Ok(n),
        _ => Err(Error::msg(format!(
            "json: cannot unmarshal {} into field {} of type int64",
            String::from_utf8_lossy(raw),
            name
        ))),
    }
}

/// A positive duration of the spec's config, in milliseconds (truncated, as Go's
/// `Duration.Milliseconds`).
fn positive_duration(config: &Config, field: &str) -> Result<Duration, Error> {
    match config.duration(field)? {
        Some(d) if !d.is_zero() => Ok(d),
        _ => Err(Error::msg(format!("carts: config {} must be a positive duration", field))),
    }
}

/// The processor: its variables, and the durations of the spec's config.
struct Carts {
    items: MapState<Line>,
    history: ListState<String>,
    abandon_at: ValueState<i64>,
    remind_at: ValueState<i64>,

    abandon_after_ms: i64,
    remind_after_ms: i64,
    w: ObjectWriter, // scratch: output rows
}

fn millis(d: Duration) -> i64 {
    d.as_millis().min(i64::MAX as u128) as i64
}

impl Carts {
    /// Emits the cart's output row: its distinct items and total, and with `events` the number
    /// of its live history entries.
    fn emit_summary(&mut self, user: &Key, what: &str, events: bool, out: &mut Emitter) -> Result<(), Error> {
        let (mut items, mut total) = (0i64, 0f64);
        for entry in self.items.iter() {
            let (_, l) = entry?;
            items += 1;
            total += l.qty as f64 * l.price;
        }
        self.w.clear().raw("user_id", user.json()).str("event", what).i64("items", items).f64("total", total);
        if events {
            let mut n = 0i64;
            for h in self.history.iter() {
                h?;
                n += 1;
            }
            self.w.i64("events", n);
        }
        out.emit(&self.w);
        Ok(())
    }

    /// Empties every variable and deletes every timer.
    fn clear(&mut self, timers: &mut Timers) -> Result<(), Error> {
        self.items.clear();
        self.history.clear();
        self.abandon_at.clear();
        self.remind_at.clear();
        for ts in timers.list()? {
            timers.delete(ts)?;
        }
        Ok(())
    }
}

impl StatefulProcessor for Carts {
    fn init(h: &mut ProcessorHandle) -> Result<Self, Error> {
        let abandon_after = positive_duration(h.config(), "abandon_after")?;
        let remind_after = positive_duration(h.config(), "remind_after")?;
        let ttl = match h.config().duration("history_ttl")? {
            Some(d) if !d.is_zero() => d,
            _ => return Err("carts: config history_ttl must be a positive duration".into()),
        };
        Ok(Carts {
            items: h.map_state("items"),
            history: h.list_state_with_ttl("history", ttl),
            abandon_at: h.value_state("abandon_at"),
            remind_at: h.value_state("remind_at"),
            abandon_after_ms: millis(abandon_after),
            remind_after_ms: millis(remind_after),
            w: ObjectWriter::new(),
        })
    }

    /// Applies the rows in arrival order, then moves the abandon timer and sets the reminder of
    /// a cart that has items.
    fn handle_input_rows(&mut self, user: &Key, rows: InputRows, timers: &mut Timers, out: &mut Emitter) -> Result<(), Error> {
        for row in rows {
            let o = Object::parse(row)?;
            let event = o.str("event")?.unwrap_or_default().into_owned();
            let item = o.str("item")?.unwrap_or_default();
            let qty = int64(&o, "qty")?;
            let price = o.f64("price")?.unwrap_or(0.0);
            self.history.append(&event)?;
            match event.as_str() {
                "add" => {
                    let mut l = self.items.get(&item)?.unwrap_or_default();
                    l.qty = l.qty.wrapping_add(qty);
                    l.price = price;
                    self.items.update(&item, &l)?;
                }
                "remove" => {
                    let mut l = match self.items.get(&item)? {
                        Some(l) => l,
                        None => continue,
                    };
                    l.qty = l.qty.wrapping_sub(qty);
                    if l.qty <= 0 {
                        self.items.remove(&item);
                    } else {
                        self.items.update(&item, &l)?;
                    }
                }
                "checkout" => {
                    self.emit_summary(user, "checkout", true, out)?;
                    self.clear(timers)?;
                }
                _ => {
                    let mut q = Vec::new();
                    json::write_str(&mut q, &event);
                    return Err(Error::msg(format!("carts: unknown event {}", String::from_utf8_lossy(&q))));
                }
            }
        }
        if !self.items.exists()? {
            return Ok(()); // an empty cart keeps the timers it has
        }
        let now = timers.current_processing_time_ms();
        if let Some(old) = self.abandon_at.get_option()? {
            timers.delete(old)?;
        }
        let at = now.wrapping_add(self.abandon_after_ms);
        timers.register(at)?;
        self.abandon_at.update(&at)?;
        if self.remind_at.exists()? {
            return Ok(()); // one reminder per cart: later activity does not move it
        }
        let at = now.wrapping_add(self.remind_after_ms);
        timers.register(at)?;
        self.remind_at.update(&at)
    }

    /// Abandons the cart (its abandon timer) or reminds the user (its reminder, after which
    /// remind_at stays set: one reminder per cart).
    fn handle_expired_timer(&mut self, user: &Key, timer_ms: i64, timers: &mut Timers, out: &mut Emitter) -> Result<(), Error> {
        if self.abandon_at.get_option()? == Some(timer_ms) {
            self.emit_summary(user, "abandoned", true, out)?;
            return self.clear(timers);
        }
        if self.remind_at.get_option()? == Some(timer_ms) {
            self.emit_summary(user, "reminder", false, out)?;
        }
        Ok(())
    }
}

groupstate::export_processor!(Carts);
