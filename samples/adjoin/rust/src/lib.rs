//! adjoin, the stream-stream join sample (ABI v2, a deployment with two inputs), in Rust: joins
//! ad impressions with the clicks on them, a click at c matching an impression at i of the same
//! ad when i <= c <= i + within, emits each pair once, and emits an impression that no click
//! matched with click_ts null once the watermark has passed i + within (a left outer join).
//! Same behaviour, state and output as ../go/main.go; see ../README.md for the rules and the
//! scenario that pins them down in every language.
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
//!         --crate-name adjoin -C lto=fat -C codegen-units=1 -L sdk/rust/target/v2 \
//!         --extern groupstate=sdk/rust/target/v2/libgroupstate.rlib \
//!         -o samples/adjoin/rust/adjoin.wasm samples/adjoin/rust/src/lib.rs

use groupstate::json::{Object, ObjectWriter};
use groupstate::{Emitter, Error, InputRows, Key, ListState, ProcessorHandle, StateCodec, StatefulProcessor, Timers};

/// The spec's inputs.
const IMPRESSIONS: &str = "impressions";
const CLICKS: &str = "clicks";

/// An element of the impressions list, stored as {"ts", "matched"}: an impression's time, and
/// whether a click matched it.
#[derive(Clone, Copy)]
struct Impression {
    ts: i64,
    matched: bool,
}

impl StateCodec for Impression {
    fn encode_json(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        let mut w = ObjectWriter::new();
        w.i64("ts", self.ts).bool("matched", self.matched);
        out.extend_from_slice(w.as_bytes());
        Ok(())
    }

    fn decode_json(b: &[u8]) -> Result<Self, Error> {
        let o = Object::parse(b)?;
        Ok(Impression { ts: o.i64("ts")?.unwrap_or(0), matched: o.bool("matched")?.unwrap_or(false) })
    }
}

/// The processor: each side's rows wait in a list until the watermark has passed the last time
/// a row of the other side could match them.
struct Adjoin {
    impressions: ListState<Impression>,
    clicks: ListState<i64>,
    within: i64,      // ms
    w: ObjectWriter, // scratch: output rows
}

/// A row's ts as the Go sample reads it: field `ts` (its name matched ASCII case-insensitively,
/// the last one winning, as encoding/json does), a JSON number in epoch milliseconds, truncated
/// to an integer. Otherwise the error says what is wrong ("no ts", "ts "x" is not a number").
fn row_ts(row: &[u8]) -> Result<i64, String> {
    let o = Object::parse(row).map_err(|e| e.to_string())?;
    let mut ts = None;
    for (name, v) in o.iter() {
        if name.eq_ignore_ascii_case("ts") {
            ts = Some(v);
        }
    }
    let v = ts.ok_or_else(|| "no ts".to_string())?;
    match v.as_f64() {
        Ok(f) if f.is_finite() => Ok(f as i64), // Go's int64(f): truncated
        _ => Err(format!("ts {} is not a number", String::from_utf8_lossy(v.raw()))),
    }
}

/// `names` as Go's `%q` prints a `[]string`: `["a" "b"]` (input names need no escapes).
fn quoted(names: &[String]) -> String {
    let q: Vec<String> = names.iter().map(|n| format!("\"{}\"", n)).collect();
    format!("[{}]", q.join(" "))
}

/// Writes a list back when the call changed it: the elements from its first `kept` on are
/// appended when the ones before are unchanged (`changed` false: the common case of a data call,
/// one op per row), else the list is written whole; an empty list is cleared, so a key whose rows
/// have all been evicted holds no state.
fn store<T: StateCodec>(l: &ListState<T>, all: &[T], kept: usize, changed: bool) -> Result<(), Error> {
    if all.is_empty() {
        if kept > 0 || changed {
            l.clear();
        }
        return Ok(());
    }
    if changed {
        return l.put(all);
    }
    if all.len() > kept {
        return l.append_all(&all[kept..]);
    }
    Ok(())
}

impl Adjoin {
    /// Reads both lists.
    fn load(&self) -> Result<(Vec<Impression>, Vec<i64>), Error> {
        Ok((self.impressions.get()?, self.clicks.get()?))
    }

    /// Emits {"ad_id", "impression_ts", "click_ts"}, click_ts null for an unmatched impression.
    fn emit(&mut self, ad: &Key, impression: i64, click: Option<i64>, out: &mut Emitter) {
        self.w.clear().raw("ad_id", ad.json()).i64("impression_ts", impression);
        match click {
            Some(c) => self.w.i64("click_ts", c),
            None => self.w.null("click_ts"),
        };
        out.emit(&self.w);
    }
}

impl StatefulProcessor for Adjoin {
    fn init(h: &mut ProcessorHandle) -> Result<Self, Error> {
        let within = match h.config().duration("within")? {
            Some(d) if d.as_millis() > 0 => d.as_millis().min(i64::MAX as u128) as i64,
            _ => return Err("adjoin: config within must be a positive duration".into()),
        };
        let inputs = h.inputs();
        if inputs.len() != 2 || !inputs.iter().any(|n| n == IMPRESSIONS) || !inputs.iter().any(|n| n == CLICKS) {
            return Err(Error::msg(format!(
                "adjoin: the spec's inputs must be {} and {}, got {}",
                IMPRESSIONS,
                CLICKS,
                quoted(inputs)
            )));
        }
        Ok(Adjoin {
            impressions: h.list_state("impressions"),
            clicks: h.list_state("clicks"),
            within,
            w: ObjectWriter::new(),
        })
    }

    /// Joins each row, in order, with the other side's buffered rows, then buffers it until the
    /// watermark passes the last time it could match: an impression at i until i + within, a
    /// click at c until c.
    fn handle_input_rows(&mut self, ad: &Key, rows: InputRows, timers: &mut Timers, out: &mut Emitter) -> Result<(), Error> {
        let (mut imps, mut clicks) = self.load()?;
        let (buffered, buffered_clicks) = (imps.len(), clicks.len()); // the elements in the lists already
        let mut marked = false; // one of them was matched by a click of this call
        for (n, (input, row)) in rows.with_inputs().enumerate() {
            let ts = row_ts(row).map_err(|e| Error::msg(format!("adjoin: row {} ({}): {}", n, input, e)))?;
            match input {
                IMPRESSIONS => {
                    let mut matched = false;
                    for &c in &clicks {
                        if ts <= c && c <= ts.wrapping_add(self.within) {
                            self.emit(ad, ts, Some(c), out);
                            matched = true;
                        }
                    }
                    imps.push(Impression { ts, matched });
                    timers.register(ts.wrapping_add(self.within))?;
                }
                CLICKS => {
                    for k in 0..imps.len() {
                        let i = imps[k].ts;
                        if i <= ts && ts <= i.wrapping_add(self.within) {
                            self.emit(ad, i, Some(ts), out);
                            marked = marked || (k < buffered && !imps[k].matched);
                            imps[k].matched = true;
                        }
                    }
                    clicks.push(ts);
                    timers.register(ts)?;
                }
                _ => return Err(Error::msg(format!("adjoin: row {} comes from unknown input \"{}\"", n, input))),
            }
        }
        store(&self.impressions, &imps, buffered, marked)?;
        store(&self.clicks, &clicks, buffered_clicks, false)
    }

    /// Evicts what no row can match any more, now that the watermark has passed `timer_ms`: the
    /// impressions with i + within <= timer_ms (one that no click matched is emitted with
    /// click_ts null) and the clicks with c <= timer_ms (dropped).
    fn handle_expired_timer(&mut self, ad: &Key, timer_ms: i64, _timers: &mut Timers, out: &mut Emitter) -> Result<(), Error> {
        let (imps, mut clicks) = self.load()?;
        let (n_imps, n_clicks) = (imps.len(), clicks.len());
        let mut keep = Vec::with_capacity(imps.len());
        for im in imps {
            if im.ts.wrapping_add(self.within) > timer_ms {
                keep.push(im);
            } else if !im.matched {
                self.emit(ad, im.ts, None, out);
            }
        }
        clicks.retain(|&c| c > timer_ms);
        store(&self.impressions, &keep, n_imps, keep.len() != n_imps)?;
        store(&self.clicks, &clicks, n_clicks, clicks.len() != n_clicks)
    }
}

groupstate::export_processor!(Adjoin);
