//! Native tests: `/usr/bin/rustc --edition 2021 --test sdk/rust/src/lib.rs -o T && ./T`
//! (or `make test-rust`). The byte strings are the examples of abi/README.md.

use std::time::Duration;

use crate::json::{Object, ObjectWriter, Value};
use crate::rt::{parse_init, process_buffer};
use crate::*;

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// The handler of the examples in abi/README.md 4.3/4.4: counts in {"n":..}, fails timeouts.
struct Example;

impl Handler for Example {
    fn init(_: &Config) -> Result<Self, Error> {
        Ok(Example)
    }
    fn handle(&mut self, _k: &Key, rows: Rows, st: &mut GroupState, out: &mut Emitter) -> Result<(), Error> {
        if st.has_timed_out() {
            out.emit(b"dropped");
            return Err("boom".into());
        }
        let n = Object::parse(st.get()?)?.i64("n")?.unwrap_or(0) + rows.len() as i64;
        let mut w = ObjectWriter::new();
        w.i64("n", n);
        out.emit(&w);
        st.update(&w)?;
        st.set_timeout_duration(Duration::from_secs(10))
    }
}

fn cfg(mode: TimeoutMode, wm: bool) -> Config {
    Config::new("demo", mode, wm, b"{}").unwrap()
}

#[test]
fn init_example() {
    let b = hex("01000000 01000000 00000000 04000000 64656d6f 0d000000 7b2274746c223a22 31307322 7d");
    assert_eq!(b.len(), 37);
    let c = parse_init(&b).unwrap();
    assert_eq!(c.name(), "demo");
    assert_eq!(c.timeout_mode(), TimeoutMode::ProcessingTime);
    assert!(!c.has_watermark());
    assert_eq!(c.duration("ttl").unwrap(), Some(Duration::from_secs(10)));
    assert_eq!(c.duration("nope").unwrap(), None);

    let mut bad = b.clone();
    bad[0] = 2;
    assert_eq!(parse_init(&bad).unwrap_err(), "groupstate: host ABI version 2, module implements version 1");
    let mut bad = b.clone();
    bad[4] = 3;
    assert_eq!(parse_init(&bad).unwrap_err(), "groupstate: unknown timeout mode 3");
    let mut bad = b.clone();
    bad.push(0);
    assert_eq!(parse_init(&bad).unwrap_err(), "groupstate: init buffer malformed");
}

#[test]
fn process_example() {
    let input = hex(
        "02000000 e803000000000000 0000000000000000
         02000000 03000000 226122 07000000 7b226e223a317d 01000000 09000000 7b226b223a2261227d
         01000000 01000000 37 00000000 00000000",
    );
    assert_eq!(input.len(), 76);
    let want = hex(
        "00000000 02000000
         01000000 07000000 7b226e223a327d 00000000 01000000 01000000 f82a000000000000
         07000000 7b226e223a327d 00000000
         00000000 01000000 00000000 00000000 0000000000000000 00000000 04000000 626f6f6d",
    );
    assert_eq!(want.len(), 94);
    let (mut out, mut scratch) = (Vec::new(), Vec::new());
    process_buffer(&mut Example, &cfg(TimeoutMode::ProcessingTime, false), &input, &mut out, &mut scratch);
    assert_eq!(out, want);

    // Trailing bytes and truncation are whole-call errors.
    let mut bad = input.clone();
    bad.push(0);
    process_buffer(&mut Example, &cfg(TimeoutMode::ProcessingTime, false), &bad, &mut out, &mut scratch);
    assert_eq!(&out[..4], &[1, 0, 0, 0]);
    assert_eq!(&out[8..], b"groupstate: trailing bytes in process buffer");
    process_buffer(&mut Example, &cfg(TimeoutMode::ProcessingTime, false), &input[..70], &mut out, &mut scratch);
    assert_eq!(&out[8..], b"groupstate: process buffer malformed at group 1");

    // Zero groups.
    let empty = hex("00000000 0000000000000000 0000000000000000");
    process_buffer(&mut Example, &cfg(TimeoutMode::ProcessingTime, false), &empty, &mut out, &mut scratch);
    assert_eq!(out, hex("00000000 00000000"));
}

#[test]
fn state_handle_rules() {
    let pt = cfg(TimeoutMode::ProcessingTime, false);
    let mut s = Vec::new();
    let mut st = GroupState::new(&pt, None, false, 1000, 0, &mut s);
    assert!(!st.exists());
    assert_eq!(st.get().unwrap_err().kind(), ErrorKind::NoState);
    assert_eq!(st.get().unwrap_err().message(), "groupstate: state is either not defined or has already been removed");
    assert_eq!(st.get_option(), None);
    assert_eq!(st.update(None::<&[u8]>).unwrap_err().message(), "groupstate: null is not a valid state value");
    assert_eq!(st.action(), Action::Keep);
    st.update(b"").unwrap();
    assert_eq!(st.get().unwrap(), b"");
    st.remove();
    st.remove();
    assert_eq!(st.action(), Action::Remove);
    assert!(!st.exists());
    st.update("x").unwrap();
    assert_eq!((st.action(), st.get().unwrap()), (Action::Update, &b"x"[..]));
    assert_eq!(st.set_timeout_duration(Duration::from_micros(500)).unwrap_err().kind(), ErrorKind::NonPositiveDuration);
    assert_eq!(st.timeout_ms(), 0);
    st.set_timeout_duration(Duration::from_millis(1)).unwrap();
    assert_eq!(st.timeout_ms(), 1001);
    assert_eq!(st.set_timeout_duration_ms(i64::MAX).unwrap_err().kind(), ErrorKind::DurationOverflow);
    assert_eq!(st.timeout_ms(), 1001);
    assert_eq!(
        st.set_timeout_timestamp(5).unwrap_err().message(),
        "groupstate: cannot set timeout timestamp without event_time timeout"
    );
    assert_eq!(st.current_watermark_ms().unwrap_err().message(), "groupstate: no watermark is defined");
    assert_eq!(st.current_processing_time_ms(), 1000);

    let et = cfg(TimeoutMode::EventTime, true);
    let mut st = GroupState::new(&et, Some(b"v"), true, 1000, 20000, &mut s);
    assert!(st.exists() && st.has_timed_out());
    assert_eq!(st.get().unwrap(), b"v");
    assert_eq!(
        st.set_timeout_duration(Duration::from_secs(1)).unwrap_err().message(),
        "groupstate: cannot set timeout duration without processing_time timeout"
    );
    assert_eq!(st.set_timeout_timestamp(0).unwrap_err().message(), "groupstate: timeout timestamp must be positive");
    assert_eq!(
        st.set_timeout_timestamp(19999).unwrap_err().message(),
        "groupstate: timeout timestamp (19999) cannot be earlier than the current watermark (20000)"
    );
    st.set_timeout_timestamp(20000).unwrap();
    st.remove();
    assert_eq!(st.timeout_ms(), 20000);
    assert_eq!(st.current_watermark_ms().unwrap(), 20000);
}

#[test]
fn durations() {
    let ok = |s: &str| crate::duration::parse_go_duration(s).unwrap();
    assert_eq!(ok("10s"), 10_000_000_000);
    assert_eq!(ok("1m30s"), 90_000_000_000);
    assert_eq!(ok("1.5h"), 5_400_000_000_000);
    assert_eq!(ok("250ms"), 250_000_000);
    assert_eq!(ok("-1.5us"), -1500);
    assert_eq!(ok("1µs"), 1000);
    assert_eq!(ok("0"), 0);
    assert_eq!(ok(".5s"), 500_000_000);
    assert_eq!(ok("2562047h47m16.854775807s"), i64::MAX);
    let bad = |s: &str| crate::duration::parse_go_duration(s).unwrap_err();
    assert_eq!(bad("soon"), "time: invalid duration \"soon\"");
    assert_eq!(bad("10"), "time: missing unit in duration \"10\"");
    assert_eq!(bad("10x"), "time: unknown unit \"x\" in duration \"10x\"");
    assert_eq!(bad(""), "time: invalid duration \"\"");
    assert_eq!(bad("."), "time: invalid duration \".\"");
    assert_eq!(bad("2562047h47m16.854775808s"), "time: invalid duration \"2562047h47m16.854775808s\"");

    let c = Config::new("x", TimeoutMode::None, false, br#"{"a":"soon","b":1500,"c":null,"d":true,"e":"-1s","f":"500us"}"#).unwrap();
    assert_eq!(c.duration("a").unwrap_err().message(), "groupstate: config a: time: invalid duration \"soon\"");
    assert_eq!(c.duration("b").unwrap(), Some(Duration::from_millis(1500)));
    assert_eq!(c.duration("c").unwrap(), None);
    assert!(c.duration("d").is_err());
    assert!(c.duration("e").is_err());
    assert_eq!(c.duration("f").unwrap(), Some(Duration::from_micros(500)));
    assert!(Config::new("x", TimeoutMode::None, false, b"[]").is_err());
}

#[test]
fn json_read() {
    let o = Object::parse(br#" {"a": 1, "s": "x\"\u00e9\ud83d\ude00\ud800z", "n": null, "b": true,
        "nested": {"a": [1, {"x": []}, "s"]}, "a": -2, "f": 1.5e3, "big": 12345678901234567890} "#)
        .unwrap();
    assert_eq!(o.i64("a").unwrap(), Some(-2)); // last duplicate wins
    assert_eq!(o.str("s").unwrap().unwrap(), "x\"é😀\u{fffd}z");
    assert_eq!(o.i64("n").unwrap(), None);
    assert_eq!(o.i64("missing").unwrap(), None);
    assert_eq!(o.bool("b").unwrap(), Some(true));
    assert_eq!(o.i64("f").unwrap(), Some(1500));
    assert_eq!(o.f64("f").unwrap(), Some(1500.0));
    assert!(o.i64("big").is_err());
    assert!(o.i64("s").is_err());
    assert_eq!(o.get("nested").unwrap().raw(), br#"{"a": [1, {"x": []}, "s"]}"#);
    let arr: Vec<_> = o.object("nested").unwrap().unwrap().get("a").unwrap().as_array().unwrap().collect();
    assert_eq!(arr.len(), 3);
    assert_eq!(o.iter().count(), 8);
    let escaped_name = Object::parse(br#"{"\u0074s": 5}"#).unwrap();
    assert_eq!(escaped_name.i64("ts").unwrap(), Some(5));

    for bad in [
        &b"{"[..], b"{}x", b"{\"a\"}", b"{\"a\":}", b"{\"a\":1,}", b"[1,]", b"{\"a\":01}", b"{\"a\":1.}",
        b"{\"a\":\"\x01\"}", b"{\"a\":\"\\x\"}", b"{\"a\":tru}", b"\"\xff\"", b"{'a':1}", b"",
    ] {
        assert!(Value::parse(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
    }
    assert!(Object::parse(b"[1]").is_err());
    let deep = format!("{}{}", "[".repeat(20000), "]".repeat(20000));
    assert!(Value::parse(deep.as_bytes()).is_err());
    let ok = format!("{}{}", "[".repeat(9000), "]".repeat(9000));
    assert!(Value::parse(ok.as_bytes()).is_ok());
}

#[test]
fn json_write() {
    let mut w = ObjectWriter::new();
    assert_eq!(w.as_bytes(), b"{}");
    w.str("s", "a\"b\\c\n\r\t\u{1}\u{7f}é/<").i64("i", -3).f64("f", 0.5).f64("nan", f64::NAN).bool("b", false).null("z").raw("k", b"42");
    assert_eq!(
        std::str::from_utf8(w.as_bytes()).unwrap(),
        "{\"s\":\"a\\\"b\\\\c\\n\\r\\t\\u0001\u{7f}é/<\",\"i\":-3,\"f\":0.5,\"nan\":null,\"b\":false,\"z\":null,\"k\":42}"
    );
    assert!(Value::parse(w.as_bytes()).is_ok());
    w.clear().i64("x", 1);
    assert_eq!(w.as_bytes(), br#"{"x":1}"#);
}

#[test]
fn keys_and_rows() {
    let k = Key::new(br#""a\"b\u0001""#);
    assert!(k.is_string());
    assert_eq!(k.as_str(), "a\"b\u{1}");
    let k = Key::new(b"42");
    assert!(!k.is_string());
    assert_eq!(k.to_string(), "42");
    let enc = Rows::encode(&[b"{}", b"{\"a\":1}"]);
    let rows = Rows::new(&enc, 2);
    assert_eq!(rows.len(), 2);
    assert_eq!(rows.collect::<Vec<_>>(), vec![&b"{}"[..], &b"{\"a\":1}"[..]]);
}

#[test]
fn rfc3339() {
    use crate::time::parse_rfc3339_ms as p;
    assert_eq!(p("1970-01-01T00:00:50Z").unwrap(), 50000);
    assert_eq!(p("2022-01-01T00:00:00Z").unwrap(), 1640995200000);
    assert_eq!(p("2022-01-01T01:00:00.1239+01:00").unwrap(), 1640995200123);
    assert_eq!(p("1969-12-31T23:59:59.9995Z").unwrap(), -1);
    assert_eq!(p("2024-02-29T12:30:00-02:30").unwrap(), 1709218800000);
    assert_eq!(p("0000-01-01T00:00:00Z").unwrap(), -62167219200000);
    for bad in ["2023-02-29T00:00:00Z", "2022-01-01t00:00:00Z", "2022-01-01T00:00:00z", "2022-01-01T24:00:00Z",
        "2022-01-01T00:00:60Z", "2022-01-01T00:00:00", "2022-01-01T00:00:00+0100", "2022-01-01T00:00:00.Z", "22-01-01T00:00:00Z"] {
        assert!(p(bad).is_err(), "{}", bad);
    }
}
