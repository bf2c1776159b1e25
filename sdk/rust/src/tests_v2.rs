//! Native tests of the ABI v2 engine (`make test-rust`, with the feature v2), against a small
//! in-memory test host standing in for the host (abi/README.md section 9): a map-backed store
//! with the op semantics of 9.4 (TTL invisibility at the batch's T, cursor paging), the state
//! function of 9.5 (writes applied in order to the group's pending state, answers back to back,
//! the size when they do not fit, -1 when refused) and the commit of 9.6 (a failed group's
//! writes are discarded). The byte strings are the examples of abi/README.md 9.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::time::Duration;

use crate::v2::*;
use crate::wire::{put_bytes, put_i64, put_u32, Reader};
use crate::*;

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

// ---------------------------------------------------------------------------------------------
// Buffers

fn init_buf(version: u32, mode: TimeoutMode, watermark: bool) -> Vec<u8> {
    let mut b = Vec::new();
    put_u32(&mut b, version);
    put_u32(&mut b, mode as u32);
    put_u32(&mut b, watermark as u32);
    put_bytes(&mut b, b"test");
    put_bytes(&mut b, b"{}");
    b
}

struct Buf(Vec<u8>);

impl Buf {
    fn new(t: i64, w: i64, groups: u32) -> Buf {
        let mut b = Vec::new();
        put_u32(&mut b, groups);
        put_i64(&mut b, t);
        put_i64(&mut b, w);
        Buf(b)
    }
    fn data(mut self, key: &str, rows: &[&str]) -> Buf {
        put_u32(&mut self.0, 0);
        put_bytes(&mut self.0, key.as_bytes());
        put_u32(&mut self.0, rows.len() as u32);
        for r in rows {
            put_bytes(&mut self.0, r.as_bytes());
        }
        self
    }
    fn timers(mut self, key: &str, ts: &[i64]) -> Buf {
        put_u32(&mut self.0, 1);
        put_bytes(&mut self.0, key.as_bytes());
        put_u32(&mut self.0, ts.len() as u32);
        for t in ts {
            put_i64(&mut self.0, *t);
        }
        self
    }
    fn initial(mut self, key: &str, initial: &str) -> Buf {
        put_u32(&mut self.0, 2);
        put_bytes(&mut self.0, key.as_bytes());
        put_bytes(&mut self.0, initial.as_bytes());
        self
    }
}

/// One decoded group result v2.
#[derive(Debug, Clone)]
struct Res {
    status: u32,
    err: String,
    emits: Vec<String>,
    ops: Vec<u8>,
}

/// Decodes a result buffer v2; a whole-call error is `Err(message)`.
fn parse_result(b: &[u8]) -> Result<Vec<Res>, String> {
    let mut r = Reader::new(b);
    let status = r.u32();
    if status == 1 {
        let m = String::from_utf8(r.bytes().to_vec()).unwrap();
        assert!(r.at_end());
        return Err(m);
    }
    assert_eq!(status, 0);
    let n = r.u32();
    let mut out = Vec::new();
    for _ in 0..n {
        let ne = r.u32();
        let emits = (0..ne).map(|_| String::from_utf8(r.bytes().to_vec()).unwrap()).collect();
        let status = r.u32();
        assert!(status <= 1);
        let err = String::from_utf8(r.bytes().to_vec()).unwrap();
        let ops = r.bytes().to_vec();
        out.push(Res { status, err, emits, ops });
    }
    assert!(r.at_end(), "trailing bytes in the result");
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// The test host

#[derive(Clone)]
struct Entry {
    b: Vec<u8>,
    exp: i64, // T >= exp: invisible; 0: none
}

#[derive(Clone, Default)]
struct VarState {
    val: Option<Entry>,
    list: Vec<Entry>,
    map: BTreeMap<Vec<u8>, Entry>,
}

#[derive(Clone, Default)]
struct KeyState {
    vars: Vec<VarState>,
    timers: BTreeSet<i64>,
}

#[derive(Default)]
struct HostState {
    mode: u32,
    decls: Vec<(String, u32, i64)>,
    keys: BTreeMap<Vec<u8>, KeyState>,
    t: i64,
    groups: Vec<Vec<u8>>,
    firing: Vec<Vec<i64>>,
    work: Vec<Option<KeyState>>,
    cur: Option<usize>,
    requests: Vec<Vec<u8>>,
    sent: usize,           // list elements and map entries answered
    refuse: Option<u8>,    // refuse requests holding this op
    begins: Vec<u32>,      // group_begin calls
}

#[derive(Clone)]
struct Host(Rc<RefCell<HostState>>);

fn op_kind(op: u8) -> u32 {
    match op {
        0x01..=0x03 => 1,
        0x10..=0x14 => 2,
        0x20..=0x26 => 3,
        _ => 0,
    }
}

fn is_read(op: u8) -> bool {
    matches!(op, OP_VALUE_GET | OP_LIST_READ | OP_LIST_EXISTS | OP_MAP_GET | OP_MAP_CONTAINS | OP_MAP_READ | OP_MAP_EXISTS | OP_TIMER_LIST)
}

impl HostState {
    fn live(&self, e: &Entry) -> bool {
        e.exp == 0 || self.t < e.exp
    }

    fn expiry(&self, v: usize) -> i64 {
        if self.decls[v].2 > 0 {
            self.t + self.decls[v].2
        } else {
            0
        }
    }

    /// Applies ops to ks; the answers of the reads, or None when refused.
    fn apply(&mut self, ks: &mut KeyState, ops: &[u8], reads_ok: bool) -> Option<Vec<u8>> {
        let mut ans = Vec::new();
        let mut r = Reader::new(ops);
        while r.i < ops.len() {
            let op = r.take(1)[0];
            if !reads_ok && is_read(op) {
                panic!("host: read op {:#x} in a result", op);
            }
            if self.refuse == Some(op) {
                return None;
            }
            let kind = op_kind(op);
            let mut vi = 0;
            if kind == 0 {
                if !matches!(op, 0x30..=0x32) {
                    return None;
                }
                if self.mode == 0 {
                    return None;
                }
            } else {
                vi = r.u32() as usize;
                if vi >= self.decls.len() || self.decls[vi].1 != kind {
                    return None;
                }
            }
            let exp = if kind != 0 { self.expiry(vi) } else { 0 };
            let t = self.t;
            let live = |e: &Entry| e.exp == 0 || t < e.exp;
            match op {
                OP_VALUE_GET => {
                    let v = &ks.vars[vi];
                    match &v.val {
                        Some(e) if live(e) => {
                            ans.push(1);
                            put_bytes(&mut ans, &e.b);
                        }
                        _ => ans.push(0),
                    }
                }
                OP_VALUE_SET => ks.vars[vi].val = Some(Entry { b: r.bytes().to_vec(), exp }),
                OP_VALUE_CLEAR => ks.vars[vi].val = None,
                OP_LIST_READ => {
                    let cursor = r.i64() as usize;
                    let max = r.u32() as usize;
                    let list = &ks.vars[vi].list;
                    let (mut page, mut size, mut next) = (Vec::new(), 0, 0u64);
                    for (i, e) in list.iter().enumerate().skip(cursor) {
                        if !live(e) {
                            continue;
                        }
                        if !page.is_empty() && size + 4 + e.b.len() > max {
                            next = i as u64;
                            break;
                        }
                        size += 4 + e.b.len();
                        page.push(e.b.clone());
                    }
                    self.sent += page.len();
                    put_u32(&mut ans, page.len() as u32);
                    for p in &page {
                        put_bytes(&mut ans, p);
                    }
                    ans.extend_from_slice(&next.to_le_bytes());
                }
                OP_LIST_APPEND | OP_LIST_PUT => {
                    if op == OP_LIST_PUT {
                        ks.vars[vi].list.clear();
                    }
                    let n = r.u32();
                    for _ in 0..n {
                        let b = r.bytes().to_vec();
                        ks.vars[vi].list.push(Entry { b, exp });
                    }
                }
                OP_LIST_CLEAR => ks.vars[vi].list.clear(),
                OP_LIST_EXISTS => ans.push(ks.vars[vi].list.iter().any(|e| live(e)) as u8),
                OP_MAP_GET => {
                    let k = r.bytes();
                    match ks.vars[vi].map.get(k) {
                        Some(e) if live(e) => {
                            ans.push(1);
                            put_bytes(&mut ans, &e.b);
                        }
                        _ => ans.push(0),
                    }
                }
                OP_MAP_CONTAINS => {
                    let k = r.bytes();
                    ans.push(ks.vars[vi].map.get(k).map(|e| live(e)).unwrap_or(false) as u8);
                }
                OP_MAP_SET => {
                    let k = r.bytes().to_vec();
                    let b = r.bytes().to_vec();
                    ks.vars[vi].map.insert(k, Entry { b, exp });
                }
                OP_MAP_REMOVE => {
                    let k = r.bytes();
                    ks.vars[vi].map.remove(k);
                }
                OP_MAP_READ => {
                    let cursor = r.bytes().to_vec();
                    let max = r.u32() as usize;
                    let (mut page, mut size, mut more, mut next) = (Vec::new(), 0, false, Vec::new());
                    for (k, e) in ks.vars[vi].map.range(cursor..) {
                        if !live(e) {
                            continue;
                        }
                        if !page.is_empty() && size + 8 + k.len() + e.b.len() > max {
                            more = true;
                            next = k.clone();
                            break;
                        }
                        size += 8 + k.len() + e.b.len();
                        page.push((k.clone(), e.b.clone()));
                    }
                    self.sent += page.len();
                    put_u32(&mut ans, page.len() as u32);
                    for (k, v) in &page {
                        put_bytes(&mut ans, k);
                        put_bytes(&mut ans, v);
                    }
                    ans.push(more as u8);
                    put_bytes(&mut ans, &next);
                }
                OP_MAP_CLEAR => ks.vars[vi].map.clear(),
                OP_MAP_EXISTS => ans.push(ks.vars[vi].map.values().any(|e| live(e)) as u8),
                OP_TIMER_REGISTER => {
                    ks.timers.insert(r.i64());
                }
                OP_TIMER_DELETE => {
                    ks.timers.remove(&r.i64());
                }
                OP_TIMER_LIST => {
                    put_u32(&mut ans, ks.timers.len() as u32);
                    for t in &ks.timers {
                        put_i64(&mut ans, *t);
                    }
                }
                _ => return None,
            }
            if r.failed {
                panic!("host: malformed request {:?}", ops);
            }
        }
        Some(ans)
    }

    /// A key's committed live state as text.
    fn dump(&self, key: &str) -> String {
        let ks = match self.keys.get(key.as_bytes()) {
            Some(k) => k,
            None => return String::new(),
        };
        let mut s = String::new();
        let txt = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        for (i, v) in ks.vars.iter().enumerate() {
            let name = &self.decls[i].0;
            if let Some(e) = &v.val {
                if self.live(e) {
                    s += &format!("{}={} ", name, txt(&e.b));
                }
            }
            let els: Vec<String> = v.list.iter().filter(|e| self.live(e)).map(|e| txt(&e.b)).collect();
            if !els.is_empty() {
                s += &format!("{}=[{}] ", name, els.join(","));
            }
            let ents: Vec<String> =
                v.map.iter().filter(|(_, e)| self.live(e)).map(|(k, e)| format!("{}:{}", txt(k), txt(&e.b))).collect();
            if !ents.is_empty() {
                s += &format!("{}={{{}}} ", name, ents.join(","));
            }
        }
        if !ks.timers.is_empty() {
            s += &format!("timers={:?}", ks.timers.iter().collect::<Vec<_>>());
        }
        s.trim_end().to_string()
    }
}

impl StateHost for Host {
    fn group_begin(&mut self, i: u32) {
        let mut h = self.0.borrow_mut();
        h.begins.push(i);
        let i = i as usize;
        assert!(i < h.groups.len(), "group_begin({}) out of range", i);
        h.cur = Some(i);
        let n = h.decls.len();
        let mut ks = h.keys.get(&h.groups[i]).cloned().unwrap_or_default();
        ks.vars.resize(n, VarState::default());
        // As the Go SDK's test host: a TIMERS group's timers are deleted as the group starts.
        for ts in h.firing[i].clone() {
            ks.timers.remove(&ts);
        }
        h.work[i] = Some(ks);
    }

    fn state(&mut self, req: &[u8], resp: &mut [u8]) -> i32 {
        let mut h = self.0.borrow_mut();
        h.requests.push(req.to_vec());
        let cur = match h.cur {
            Some(c) => c,
            None => return STATE_REFUSED,
        };
        let mut ks = h.work[cur].take().unwrap();
        let ans = h.apply(&mut ks, req, true);
        h.work[cur] = Some(ks);
        match ans {
            None => STATE_REFUSED,
            Some(a) => {
                if a.len() <= resp.len() {
                    resp[..a.len()].copy_from_slice(&a);
                }
                a.len() as i32
            }
        }
    }
}

impl Host {
    /// A host for module m, initialized (ABI v2) under `mode`, with a watermark.
    fn new<P: StatefulProcessor>(m: &mut ProcessorModule<P>, mode: TimeoutMode) -> Host {
        let res = m.init(&init_buf(2, mode, true)).to_vec();
        let mut r = Reader::new(&res);
        assert_eq!(r.u32(), 0, "init failed: {}", String::from_utf8_lossy(&res));
        r.bytes();
        let n = r.u32();
        let decls = (0..n)
            .map(|_| (String::from_utf8(r.bytes().to_vec()).unwrap(), r.u32(), r.i64()))
            .collect();
        assert!(r.at_end());
        let h = Host(Rc::new(RefCell::new(HostState { mode: mode as u32, decls, ..Default::default() })));
        m.set_state_host(Box::new(h.clone()));
        h
    }

    /// Runs `input` on m like the host would: learns the groups, calls gs_process, checks the
    /// result and commits the writes of the groups that succeeded.
    fn process<P: StatefulProcessor>(&self, m: &mut ProcessorModule<P>, input: &[u8]) -> Result<Vec<Res>, String> {
        {
            let mut h = self.0.borrow_mut();
            let mut r = Reader::new(input);
            let n = r.u32();
            h.t = r.i64();
            r.i64();
            h.groups.clear();
            h.firing.clear();
            h.cur = None;
            for _ in 0..n {
                let kind = r.u32();
                let key = r.bytes().to_vec();
                let mut firing = Vec::new();
                match kind {
                    0 => {
                        let c = r.u32();
                        for _ in 0..c {
                            r.bytes();
                        }
                    }
                    1 => {
                        let c = r.u32();
                        for _ in 0..c {
                            firing.push(r.i64());
                        }
                    }
                    _ => {
                        r.bytes();
                    }
                }
                h.groups.push(key);
                h.firing.push(firing);
            }
            h.work = vec![None; n as usize];
        }
        let out = m.process(input).to_vec();
        let res = parse_result(&out)?;
        let mut h = self.0.borrow_mut();
        assert_eq!(res.len(), h.groups.len());
        for (i, g) in res.iter().enumerate() {
            if g.status != 0 {
                continue;
            }
            let mut ks = h.work[i].take().expect("no group_begin");
            h.apply(&mut ks, &g.ops, false).expect("result ops refused");
            let key = h.groups[i].clone();
            h.keys.insert(key, ks);
        }
        Ok(res)
    }

    fn dump(&self, key: &str) -> String {
        self.0.borrow().dump(key)
    }
}

// ---------------------------------------------------------------------------------------------
// A processor driven by closures set per test (each test runs on its own thread)

struct Vars {
    count: ValueState<i64>,
    name: ValueState<String>,
    list: ListState<i64>,
    events: ListState<RawJson>,
    map: MapState<i64>,
    tval: ValueState<i64>,
    tlist: ListState<i64>,
    tmap: MapState<String>,
}

type DataFn = Box<dyn FnMut(&Vars, &Key, InputRows, &mut Timers, &mut Emitter) -> Result<(), Error>>;
type TimerFn = Box<dyn FnMut(&Vars, &Key, i64, &mut Timers, &mut Emitter) -> Result<(), Error>>;
type InitialFn = Box<dyn FnMut(&Vars, &Key, &[u8], &mut Timers, &mut Emitter) -> Result<(), Error>>;

thread_local! {
    static ON_DATA: RefCell<Option<DataFn>> = RefCell::new(None);
    static ON_TIMER: RefCell<Option<TimerFn>> = RefCell::new(None);
    static ON_INITIAL: RefCell<Option<InitialFn>> = RefCell::new(None);
}

fn on_data(f: impl FnMut(&Vars, &Key, InputRows, &mut Timers, &mut Emitter) -> Result<(), Error> + 'static) {
    ON_DATA.with(|c| *c.borrow_mut() = Some(Box::new(f)));
}

fn on_timer(f: impl FnMut(&Vars, &Key, i64, &mut Timers, &mut Emitter) -> Result<(), Error> + 'static) {
    ON_TIMER.with(|c| *c.borrow_mut() = Some(Box::new(f)));
}

struct Scripted {
    v: Vars,
}

const TTL: Duration = Duration::from_millis(1000);

impl StatefulProcessor for Scripted {
    fn init(h: &mut ProcessorHandle) -> Result<Self, Error> {
        Ok(Scripted {
            v: Vars {
                count: h.value_state("count"),
                name: h.value_state("name"),
                list: h.list_state("list"),
                events: h.list_state("events"),
                map: h.map_state("map"),
                tval: h.value_state_with_ttl("tval", TTL),
                tlist: h.list_state_with_ttl("tlist", TTL),
                tmap: h.map_state_with_ttl("tmap", TTL),
            },
        })
    }

    fn handle_input_rows(&mut self, key: &Key, rows: InputRows, timers: &mut Timers, out: &mut Emitter) -> Result<(), Error> {
        let mut f = ON_DATA.with(|c| c.borrow_mut().take()).expect("no on_data");
        let r = f(&self.v, key, rows, timers, out);
        ON_DATA.with(|c| *c.borrow_mut() = Some(f));
        r
    }

    fn handle_expired_timer(&mut self, key: &Key, ts: i64, timers: &mut Timers, out: &mut Emitter) -> Result<(), Error> {
        let mut f = ON_TIMER.with(|c| c.borrow_mut().take()).expect("no on_timer");
        let r = f(&self.v, key, ts, timers, out);
        ON_TIMER.with(|c| *c.borrow_mut() = Some(f));
        r
    }

    fn handle_initial_state(&mut self, key: &Key, initial: &[u8], timers: &mut Timers, out: &mut Emitter) -> Result<(), Error> {
        let f = ON_INITIAL.with(|c| c.borrow_mut().take());
        match f {
            None => apply_initial_state(timers, initial),
            Some(mut f) => {
                let r = f(&self.v, key, initial, timers, out);
                ON_INITIAL.with(|c| *c.borrow_mut() = Some(f));
                r
            }
        }
    }
}

fn module(mode: TimeoutMode) -> (ProcessorModule<Scripted>, Host) {
    let mut m = ProcessorModule::<Scripted>::new();
    let h = Host::new(&mut m, mode);
    (m, h)
}

fn ok(res: Result<Vec<Res>, String>) -> Vec<Res> {
    let res = res.unwrap();
    for (i, r) in res.iter().enumerate() {
        assert_eq!(r.status, 0, "group {} failed: {}", i, r.err);
    }
    res
}

fn raw(s: &str) -> RawJson {
    RawJson::new(s).unwrap()
}

// ---------------------------------------------------------------------------------------------
// Init

/// The processor of the examples of abi/README.md 9.2, 9.4 and 9.6.
struct Example {
    count: ValueState<i64>,
    events: ListState<RawJson>,
}

thread_local! {
    static EXAMPLE_MODE: RefCell<u8> = RefCell::new(0);
    static GOT: RefCell<Vec<String>> = RefCell::new(Vec::new());
}

impl StatefulProcessor for Example {
    fn init(h: &mut ProcessorHandle) -> Result<Self, Error> {
        Ok(Example { count: h.value_state("count"), events: h.list_state_with_ttl("events", Duration::from_secs(60)) })
    }
    fn handle_input_rows(&mut self, _: &Key, _: InputRows, timers: &mut Timers, _: &mut Emitter) -> Result<(), Error> {
        if EXAMPLE_MODE.with(|m| *m.borrow()) == 1 {
            return timers.register(60000);
        }
        self.count.update(&3)?;
        let first = self.events.iter().next().unwrap()?;
        let ts = timers.list()?;
        GOT.with(|g| g.borrow_mut().push(format!("{:?} {:?}", first, ts)));
        Ok(())
    }
}

/// A host that records the requests and answers them from a script.
struct ScriptHost {
    answers: Vec<Vec<u8>>,
    requests: Rc<RefCell<Vec<(Vec<u8>, usize)>>>,
}

impl StateHost for ScriptHost {
    fn group_begin(&mut self, _: u32) {}
    fn state(&mut self, req: &[u8], resp: &mut [u8]) -> i32 {
        self.requests.borrow_mut().push((req.to_vec(), resp.len()));
        if self.answers.is_empty() {
            return STATE_REFUSED;
        }
        let a = self.answers[0].clone();
        if a.len() <= resp.len() {
            resp[..a.len()].copy_from_slice(&a);
            self.answers.remove(0);
        }
        a.len() as i32
    }
}

#[test]
fn init_result_example() {
    let mut m = ProcessorModule::<Example>::new();
    let want = hex(
        "00000000 00000000 02000000
         05000000 636f756e74 01000000 0000000000000000
         06000000 6576656e7473 02000000 60ea000000000000",
    );
    assert_eq!(want.len(), 55);
    assert_eq!(m.init(&init_buf(2, TimeoutMode::ProcessingTime, false)), &want[..]);

    // A v1 host, an unknown mode, a malformed buffer.
    let res = m.init(&init_buf(1, TimeoutMode::None, false)).to_vec();
    assert_eq!(&res[..4], &[1, 0, 0, 0]);
    assert_eq!(&res[8..], b"groupstate: host ABI version 1, module implements version 2");
    let mut b = init_buf(2, TimeoutMode::None, false);
    b[4] = 3;
    assert_eq!(&m.init(&b)[8..], b"groupstate: unknown timeout mode 3");
    b.push(0);
    assert_eq!(&m.init(&b)[8..], b"groupstate: init buffer malformed");
    // Process before a successful init is a whole-call error.
    let input = Buf::new(1, 0, 1).data("\"a\"", &["{}"]).0;
    assert_eq!(parse_result(m.process(&input)).unwrap_err(), "groupstate: process called before a successful init");
}

thread_local! {
    static DECLS: RefCell<Vec<(&'static str, u8, u64)>> = RefCell::new(Vec::new());
}

struct Declarer;

impl StatefulProcessor for Declarer {
    fn init(h: &mut ProcessorHandle) -> Result<Self, Error> {
        let decls = DECLS.with(|d| d.borrow().clone());
        for (name, kind, ttl) in decls {
            let ttl = Duration::from_micros(ttl);
            match (kind, ttl.is_zero()) {
                (1, true) => drop(h.value_state::<i64>(name)),
                (1, false) => drop(h.value_state_with_ttl::<i64>(name, ttl)),
                (2, true) => drop(h.list_state::<i64>(name)),
                (2, false) => drop(h.list_state_with_ttl::<i64>(name, ttl)),
                _ => drop(h.map_state::<i64>(name)),
            }
        }
        if h.config().name() == "fail" {
            return Err("no".into());
        }
        Ok(Declarer)
    }
    fn handle_input_rows(&mut self, _: &Key, _: InputRows, _: &mut Timers, _: &mut Emitter) -> Result<(), Error> {
        Ok(())
    }
}

#[test]
fn declaration_errors() {
    let run = |decls: Vec<(&'static str, u8, u64)>| {
        DECLS.with(|d| *d.borrow_mut() = decls);
        let mut m = ProcessorModule::<Declarer>::new();
        let res = m.init(&init_buf(2, TimeoutMode::None, false)).to_vec();
        if res[0] == 0 {
            String::new()
        } else {
            String::from_utf8(res[8..].to_vec()).unwrap()
        }
    };
    assert_eq!(run(vec![("a", 1, 0), ("b_2", 2, 0), ("c", 3, 0)]), "");
    assert_eq!(run(vec![("Count", 1, 0)]), "groupstate: state variable \"Count\": name does not start with a letter a-z");
    assert_eq!(run(vec![("", 1, 0)]), "groupstate: state variable \"\": name is empty");
    assert_eq!(run(vec![("a-b", 1, 0)]), "groupstate: state variable \"a-b\": name has a byte other than a-z, 0-9 and _ at offset 1");
    let long: &'static str = Box::leak("a".repeat(65).into_boxed_str());
    assert_eq!(run(vec![(long, 1, 0)]), format!("groupstate: state variable {:?}: name is longer than 64 bytes", long));
    assert_eq!(run(vec![("a", 1, 0), ("a", 3, 0)]), "groupstate: state variable \"a\": declared twice");
    assert_eq!(run(vec![("a", 1, 500)]), "groupstate: state variable \"a\": ttl 500µs is not at least 1ms");
    let many: Vec<(&'static str, u8, u64)> =
        (0..257).map(|i| (&*Box::leak(format!("v{}", i).into_boxed_str()), 1, 0)).collect();
    assert_eq!(run(many), "groupstate: 257 state variables declared, at most 256 are allowed");
}

#[test]
fn request_and_result_examples() {
    // 9.4: VALUE_SET var 0 to 3, LIST_READ var 1 from the start (max_bytes 4096), TIMER_LIST.
    // The SDK sends one read per request (with the writes before it), so the example's request
    // goes as two: VALUE_SET + LIST_READ, then TIMER_LIST; its answers come back in two.
    let requests = Rc::new(RefCell::new(Vec::new()));
    let mut m = ProcessorModule::<Example>::new();
    m.init(&init_buf(2, TimeoutMode::ProcessingTime, false));
    m.set_sizes(4096, 64);
    let answers = hex(
        "01000000 07000000 7b2265223a317d 0000000000000000
         01000000 60ea000000000000",
    );
    assert_eq!(answers.len(), 35);
    let script = vec![answers[..23].to_vec(), answers[23..].to_vec()];
    m.set_state_host(Box::new(ScriptHost { answers: script, requests: requests.clone() }));
    let input = Buf::new(1000, 0, 1).data("\"a\"", &["{}"]).0;
    let res = parse_result(m.process(&input)).unwrap();
    assert_eq!(res[0].status, 0, "{}", res[0].err);
    assert!(res[0].ops.is_empty(), "the write went with the read");
    let want = hex(
        "02 00000000 01000000 33
         10 01000000 0000000000000000 00100000
         32",
    );
    assert_eq!(want.len(), 28);
    let reqs = requests.borrow();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].0, want[..27].to_vec());
    assert_eq!(reqs[1].0, want[27..].to_vec());
    assert_eq!(reqs[0].1, 64);
    assert_eq!(GOT.with(|g| g.borrow().clone()), vec!["RawJson({\"e\":1}) [60000]".to_string()]);

    // 9.6: a group that emits nothing and registers a timer at 60000.
    EXAMPLE_MODE.with(|m| *m.borrow_mut() = 1);
    let want = hex("00000000 01000000 00000000 00000000 00000000 09000000 30 60ea000000000000");
    assert_eq!(want.len(), 33);
    assert_eq!(m.process(&input), &want[..]);
}

// ---------------------------------------------------------------------------------------------
// Ops

#[test]
fn value_ops() {
    let (mut m, h) = module(TimeoutMode::ProcessingTime);
    on_data(|v, _, _, _, out| {
        assert_eq!(v.count.get_option()?, None);
        assert!(!v.count.exists()?);
        assert_eq!(v.count.get().unwrap_err().kind(), ErrorKind::NoState);
        v.count.update(&41)?;
        assert_eq!(v.count.get()?, 41); // own write, from the cache
        v.name.update(&"é\"x".to_string())?;
        assert_eq!(v.name.get()?, "é\"x");
        assert_eq!(v.count.update(&1).map(|_| ()), Ok(()));
        out.emit("done");
        Ok(())
    });
    let res = ok(h.process(&mut m, &Buf::new(1000, 0, 1).data("\"a\"", &["{}"]).0));
    assert_eq!(res[0].emits, vec!["done"]);
    assert_eq!(h.dump("\"a\""), "count=1 name=\"é\\\"x\"");

    // The next batch reads the committed value: exists + get cost one state call.
    on_data(|v, _, _, _, _| {
        assert!(v.count.exists()?);
        assert_eq!(v.count.get()?, 1);
        assert_eq!(v.count.get_raw()?, Some(b"1".to_vec()));
        v.count.clear();
        assert_eq!(v.count.get_option()?, None);
        Ok(())
    });
    let before = m.requests();
    ok(h.process(&mut m, &Buf::new(2000, 0, 1).data("\"a\"", &["{}"]).0));
    assert_eq!(m.requests() - before, 1);
    assert_eq!(h.dump("\"a\""), "name=\"é\\\"x\"");

    // A value that encodes to null is refused and writes nothing; a failed encoding too.
    on_data(|v, _, _, _, _| {
        assert_eq!(v.events.append(&raw("null")).unwrap_err().message(), "groupstate: null is not a valid state value");
        assert_eq!(v.events.put(&[raw("1"), raw("null")]).unwrap_err().message(), "element 1: groupstate: null is not a valid state value");
        assert_eq!(v.events.append_all(&[raw("1"), raw("null")]).unwrap_err().kind(), ErrorKind::NullState);
        let bad = v.tval.update(&5).and_then(|_| {
            // f64 NaN does not encode: an encoding error names the variable.
            let f: Result<(), Error> = Err(Error::msg("x"));
            f
        });
        assert!(bad.is_err());
        Ok(())
    });
    let res = ok(h.process(&mut m, &Buf::new(3000, 0, 1).data("\"a\"", &["{}"]).0));
    assert_eq!(res[0].ops, hex("02 05000000 01000000 35"), "only the tval write");
}

#[test]
fn list_ops() {
    let (mut m, h) = module(TimeoutMode::ProcessingTime);
    on_data(|v, _, _, _, _| {
        assert!(!v.list.exists()?);
        assert_eq!(v.list.get()?, Vec::<i64>::new());
        v.list.append(&1)?;
        v.list.append_all(&[2, 3])?;
        v.list.append_all(&[])?;
        assert!(v.list.exists()?);
        assert_eq!(v.list.get()?, vec![1, 2, 3]); // own writes
        v.events.put(&[raw(r#"{"a":1}"#), raw("[1,2]")])?;
        v.events.append(&raw("\"x\""))?;
        Ok(())
    });
    ok(h.process(&mut m, &Buf::new(1000, 0, 1).data("\"a\"", &["{}"]).0));
    assert_eq!(h.dump("\"a\""), "list=[1,2,3] events=[{\"a\":1},[1,2],\"x\"]");
    on_data(|v, _, _, _, _| {
        let evs: Vec<RawJson> = v.events.iter().collect::<Result<_, _>>()?;
        assert_eq!(evs[0].object()?.i64("a")?, Some(1));
        v.list.put(&[9])?;
        assert_eq!(v.list.get()?, vec![9]);
        v.events.clear();
        assert!(!v.events.exists()?);
        v.list.put(&[])?;
        assert!(!v.list.exists()?);
        v.list.append(&7)?;
        Ok(())
    });
    ok(h.process(&mut m, &Buf::new(2000, 0, 1).data("\"a\"", &["{}"]).0));
    assert_eq!(h.dump("\"a\""), "list=[7]");
    // An element that does not decode fails the call: the iteration yields the error once.
    on_data(|v, _, _, _, _| {
        v.events.put(&[raw("\"not a number\"")])?;
        Ok(())
    });
    ok(h.process(&mut m, &Buf::new(3000, 0, 1).data("\"a\"", &["{}"]).0));
    {
        // Move events into list through the host, to store a string where i64s are expected.
        let mut hs = h.0.borrow_mut();
        let ks = hs.keys.get_mut(&b"\"a\""[..]).unwrap();
        ks.vars[2].list = ks.vars[3].list.clone();
    }
    on_data(|v, _, _, _, _| {
        let mut it = v.list.iter();
        let e = it.next().unwrap().unwrap_err();
        assert_eq!(e.message(), "groupstate: decoding state variable list: json: want a number, got \"not a number\"");
        assert!(it.next().is_none());
        Ok(()) // the call fails all the same
    });
    let res = h.process(&mut m, &Buf::new(4000, 0, 1).data("\"a\"", &["{}"]).0).unwrap();
    assert_eq!((res[0].status, res[0].err.as_str()), (1, "groupstate: decoding state variable list: json: want a number, got \"not a number\""));

    // A value that does not decode is an error of get, which the processor may handle.
    {
        let mut hs = h.0.borrow_mut();
        let ks = hs.keys.get_mut(&b"\"a\""[..]).unwrap();
        ks.vars[0].val = Some(Entry { b: b"\"x\"".to_vec(), exp: 0 });
        ks.vars[4].map.insert(b"k".to_vec(), Entry { b: b"[]".to_vec(), exp: 0 });
    }
    on_data(|v, _, _, _, _| {
        assert_eq!(v.count.get().unwrap_err().message(), "groupstate: decoding state variable count: json: want a number, got \"x\"");
        assert!(v.count.get_option().is_err());
        assert!(v.count.exists()?);
        assert_eq!(v.map.get("k").unwrap_err().message(), "groupstate: decoding state variable map: json: want a number, got []");
        v.count.update(&0)?;
        v.map.remove("k");
        Ok(())
    });
    ok(h.process(&mut m, &Buf::new(5000, 0, 1).data("\"a\"", &["{}"]).0));
    assert_eq!(h.dump("\"a\""), "count=0 list=[\"not a number\"] events=[\"not a number\"]");
}

#[test]
fn map_ops() {
    let (mut m, h) = module(TimeoutMode::ProcessingTime);
    on_data(|v, _, _, _, _| {
        assert!(!v.map.exists()?);
        assert_eq!(v.map.get("x")?, None);
        v.map.update("b", &2)?;
        v.map.update("a", &1)?;
        v.map.update("é", &3)?;
        v.map.update("c", &4)?;
        v.map.remove("c");
        assert!(v.map.exists()?);
        assert!(v.map.contains("a")? && !v.map.contains("c")?);
        assert_eq!(v.map.get("b")?, Some(2));
        let all: Vec<(String, i64)> = v.map.iter().collect::<Result<_, _>>()?;
        assert_eq!(all, vec![("a".to_string(), 1), ("b".to_string(), 2), ("é".to_string(), 3)]);
        assert_eq!(v.map.keys().collect::<Result<Vec<_>, _>>()?, vec!["a", "b", "é"]);
        assert_eq!(v.map.values().collect::<Result<Vec<_>, _>>()?, vec![1, 2, 3]);
        Ok(())
    });
    ok(h.process(&mut m, &Buf::new(1000, 0, 1).data("\"a\"", &["{}"]).0));
    assert_eq!(h.dump("\"a\""), "map={a:1,b:2,é:3}");
    on_data(|v, _, _, _, _| {
        v.map.clear();
        assert!(!v.map.exists()?);
        v.map.update("z", &26)?;
        Ok(())
    });
    ok(h.process(&mut m, &Buf::new(2000, 0, 1).data("\"a\"", &["{}"]).0));
    assert_eq!(h.dump("\"a\""), "map={z:26}");
}

#[test]
fn timer_ops() {
    let (mut m, h) = module(TimeoutMode::EventTime);
    on_data(|_, _, _, t, _| {
        assert_eq!(t.current_processing_time_ms(), 1000);
        assert_eq!(t.current_watermark_ms()?, 500);
        assert_eq!(t.list()?, Vec::<i64>::new());
        t.register(3000)?;
        t.register(2000)?;
        t.register(2000)?;
        t.register(4000)?;
        t.delete(4000)?;
        assert_eq!(t.list()?, vec![2000, 3000]);
        t.register(5000)?;
        Ok(())
    });
    ok(h.process(&mut m, &Buf::new(1000, 500, 1).data("\"a\"", &["{}"]).0));
    assert_eq!(h.dump("\"a\""), "timers=[2000, 3000, 5000]");

    // Under timeout: none timer ops are refused by the SDK, and the list is empty.
    let (mut m, h) = module(TimeoutMode::None);
    on_data(|_, _, _, t, _| {
        let e = t.register(1).unwrap_err();
        assert_eq!((e.kind(), e.message()), (ErrorKind::Config, "groupstate: timers need timeout processing_time or event_time in the deployment spec"));
        assert!(t.delete(1).is_err());
        assert_eq!(t.list()?, Vec::<i64>::new());
        Ok(())
    });
    ok(h.process(&mut m, &Buf::new(1000, 0, 1).data("\"a\"", &["{}"]).0));
    assert_eq!(h.0.borrow().requests.len(), 0);
}

#[test]
fn paging_10k() {
    let (mut m, h) = module(TimeoutMode::ProcessingTime);
    m.set_sizes(256, 64);
    on_data(|v, _, _, _, _| {
        let xs: Vec<i64> = (0..10_000).collect();
        v.list.append_all(&xs)?;
        for i in 0..10_000 {
            v.map.update(&format!("k{:05}", i), &i)?;
        }
        Ok(())
    });
    let res = ok(h.process(&mut m, &Buf::new(1000, 0, 1).data("\"a\"", &["{}"]).0));
    assert!(res[0].ops.len() > 10_000 * 8);
    assert_eq!(h.0.borrow().requests.len(), 0, "writes only: no state call");

    on_data(|v, _, _, _, out| {
        // The whole list and map, a page at a time.
        let mut n = 0;
        for (i, x) in v.list.iter().enumerate() {
            assert_eq!(x?, i as i64);
            n += 1;
        }
        let mut k = 0;
        for e in v.map.iter() {
            let (key, val) = e?;
            assert_eq!(key, format!("k{:05}", k));
            assert_eq!(val, k);
            k += 1;
        }
        out.emit(format!("{} {}", n, k));
        Ok(())
    });
    let before = h.0.borrow().requests.len();
    let res = ok(h.process(&mut m, &Buf::new(2000, 0, 1).data("\"a\"", &["{}"]).0));
    assert_eq!(res[0].emits, vec!["10000 10000"]);
    let reqs = h.0.borrow().requests.len() - before;
    // 256 bytes hold 42 list elements (4 + 1..4 bytes) or 14 map entries (8 + 6 + 1..4 bytes).
    assert!(reqs > 10_000 / 60 + 10_000 / 20 && reqs < 10_000 / 20 + 10_000 / 10, "{} requests", reqs);

    // Lazy: stopping after the first element fetches one page.
    on_data(|v, _, _, _, _| {
        assert_eq!(v.list.iter().next().unwrap()?, 0);
        assert_eq!(v.map.keys().next().unwrap()?, "k00000");
        assert_eq!(v.map.values().take(3).collect::<Result<Vec<_>, _>>()?, vec![0, 1, 2]);
        Ok(())
    });
    let (before, sent) = (h.0.borrow().requests.len(), h.0.borrow().sent);
    ok(h.process(&mut m, &Buf::new(3000, 0, 1).data("\"a\"", &["{}"]).0));
    let hs = h.0.borrow();
    assert_eq!(hs.requests.len() - before, 3);
    assert!(hs.sent - sent < 100, "{} elements sent", hs.sent - sent);
}

#[test]
fn resp_cap_retry() {
    let (mut m, h) = module(TimeoutMode::ProcessingTime);
    on_data(|v, _, _, _, _| {
        let xs: Vec<i64> = (0..1000).collect();
        v.list.append_all(&xs)?;
        Ok(())
    });
    ok(h.process(&mut m, &Buf::new(1000, 0, 1).data("\"a\"", &["{}"]).0));
    m.set_sizes(1 << 20, 64);
    on_data(|v, _, _, _, _| {
        v.list.append(&1000)?;
        v.count.update(&7)?;
        assert_eq!(v.list.get()?.len(), 1001); // the answer does not fit 64 bytes: sent again
        assert_eq!(v.list.get()?.len(), 1001); // now it fits
        Ok(())
    });
    let before = h.0.borrow().requests.len();
    ok(h.process(&mut m, &Buf::new(2000, 0, 1).data("\"a\"", &["{}"]).0));
    let hs = h.0.borrow();
    let reqs = &hs.requests[before..];
    assert_eq!(reqs.len(), 3);
    let reads = hex("10 02000000 0000000000000000 00001000");
    assert!(reqs[0].len() > reads.len() && reqs[0].ends_with(&reads), "writes then the read");
    assert_eq!(reqs[1], reads, "only the read again");
    assert_eq!(reqs[2], reads);
    drop(hs);
    assert_eq!(h.dump("\"a\"").matches(',').count(), 1000, "the writes were applied once");
}

#[test]
fn refused_request() {
    let (mut m, h) = module(TimeoutMode::ProcessingTime);
    h.0.borrow_mut().refuse = Some(OP_MAP_GET);
    on_data(|v, k, _, t, out| {
        if k.as_str() == "ok" {
            v.count.update(&1)?;
            return Ok(());
        }
        out.emit("dropped");
        v.count.update(&5)?;
        t.register(9999)?;
        let e = v.map.get("x").unwrap_err();
        assert_eq!(e.message(), "groupstate: the host refused a state request (see the host's log)");
        // Every later operation fails the same way and sends nothing.
        assert_eq!(v.count.get().unwrap_err(), e);
        assert_eq!(v.list.append(&1).unwrap_err(), e);
        assert_eq!(t.list().unwrap_err(), e);
        v.list.clear();
        Ok(()) // ignored: the group fails
    });
    let res = h.process(&mut m, &Buf::new(1000, 0, 2).data("\"a\"", &["{}"]).data("\"ok\"", &["{}"]).0).unwrap();
    assert_eq!(res[0].status, 1);
    assert_eq!(res[0].err, "groupstate: the host refused a state request (see the host's log)");
    assert!(res[0].emits.is_empty() && res[0].ops.is_empty());
    assert_eq!(h.0.borrow().requests.len(), 1);
    assert_eq!((res[1].status, h.dump("\"ok\"")), (0, "count=1".to_string()));
    assert_eq!(h.dump("\"a\""), "");

    // A malformed answer fails the call the same way.
    let mut m = ProcessorModule::<Scripted>::new();
    m.init(&init_buf(2, TimeoutMode::ProcessingTime, false));
    let requests = Rc::new(RefCell::new(Vec::new()));
    for (answer, want) in [
        (hex("02"), "groupstate: state answer of MAP_CONTAINS: malformed: answer is 2, not 0 or 1"),
        (hex("0100"), "groupstate: state answer of MAP_CONTAINS: malformed: trailing bytes after the answer"),
        (hex(""), "groupstate: state answer of MAP_CONTAINS: malformed: truncated"),
    ] {
        m.set_state_host(Box::new(ScriptHost { answers: vec![answer], requests: requests.clone() }));
        on_data(|v, _, _, _, _| {
            v.map.contains("x")?;
            Ok(())
        });
        let res = parse_result(m.process(&Buf::new(1000, 0, 1).data("\"a\"", &["{}"]).0)).unwrap();
        assert_eq!((res[0].status, res[0].err.as_str()), (1, want));
    }
    for (answer, want) in [
        (hex("00000000 0100000000000000"), "LIST_READ: malformed: no elements but next is not 0"),
        (hex("05000000 00000000"), "LIST_READ: malformed: 5 elements cannot fit in the answers"),
    ] {
        m.set_state_host(Box::new(ScriptHost { answers: vec![answer], requests: requests.clone() }));
        on_data(|v, _, _, _, _| v.list.get().map(|_| ()));
        let res = parse_result(m.process(&Buf::new(1000, 0, 1).data("\"a\"", &["{}"]).0)).unwrap();
        assert_eq!(res[0].err, format!("groupstate: state answer of {}", want));
    }
    for (answer, want) in [
        (hex("02000000 01000000 62 01000000 31 01000000 61 01000000 32 00 00000000"), "keys not in strictly ascending order at entry 1"),
        (hex("00000000 01 00000000"), "no entries but more is 1"),
        (hex("01000000 01000000 61 01000000 31 00 01000000 62"), "more is 0 but next is not empty"),
    ] {
        m.set_state_host(Box::new(ScriptHost { answers: vec![answer], requests: requests.clone() }));
        on_data(|v, _, _, _, _| v.map.keys().collect::<Result<Vec<_>, _>>().map(|_| ()));
        let res = parse_result(m.process(&Buf::new(1000, 0, 1).data("\"a\"", &["{}"]).0)).unwrap();
        assert_eq!(res[0].err, format!("groupstate: state answer of MAP_READ: malformed: {}", want));
    }
    m.set_state_host(Box::new(ScriptHost { answers: vec![hex("02000000 0200000000000000 0100000000000000")], requests }));
    on_data(|_, _, _, t, _| t.list().map(|_| ()));
    let res = parse_result(m.process(&Buf::new(1000, 0, 1).data("\"a\"", &["{}"]).0)).unwrap();
    assert_eq!(res[0].err, "groupstate: state answer of TIMER_LIST: malformed: timers not in strictly ascending order at timer 1");
}

#[test]
fn failing_handler() {
    let (mut m, h) = module(TimeoutMode::ProcessingTime);
    on_data(|v, k, _, t, out| {
        out.emit(format!("{}", k));
        v.count.update(&1)?;
        v.list.append(&1)?;
        assert!(v.list.exists()?); // sends the writes with a read
        t.register(5000)?;
        if k.as_str() == "bad" {
            return Err("boom".into());
        }
        Ok(())
    });
    let res = h
        .process(&mut m, &Buf::new(1000, 0, 3).data("\"a\"", &["{}"]).data("\"bad\"", &["{}"]).data("\"c\"", &["{}"]).0)
        .unwrap();
    assert_eq!(res.iter().map(|r| r.status).collect::<Vec<_>>(), vec![0, 1, 0]);
    assert_eq!((res[1].err.as_str(), res[1].emits.len(), res[1].ops.len()), ("boom", 0, 0));
    assert_eq!(res[0].emits, vec!["a"]);
    assert_eq!(h.dump("\"a\""), "count=1 list=[1] timers=[5000]");
    assert_eq!(h.dump("\"bad\""), "", "no writes of the failed group, not even those sent with a read");
    assert_eq!(h.dump("\"c\""), "count=1 list=[1] timers=[5000]");
    assert_eq!(h.0.borrow().begins, vec![0, 1, 2]);
}

#[test]
fn timers_groups() {
    let (mut m, h) = module(TimeoutMode::ProcessingTime);
    on_data(|_, _, _, t, _| {
        for ts in [10, 20, 30, 40] {
            t.register(ts)?;
        }
        Ok(())
    });
    ok(h.process(&mut m, &Buf::new(5, 0, 2).data("\"a\"", &["{}"]).data("\"b\"", &["{}"]).0));
    on_timer(|v, k, ts, t, out| {
        out.emit(format!("{} {}", k, ts));
        let n = v.count.get_option()?.unwrap_or(0);
        v.count.update(&(n + 1))?;
        if ts == 10 {
            t.delete(20)?; // skipped in this group, even though registered again
            t.register(20)?;
            t.delete(5)?; // not in the group: nothing to skip
        }
        if k.as_str() == "b" && ts == 30 {
            return Err("timer boom".into());
        }
        Ok(())
    });
    let res = h.process(&mut m, &Buf::new(100, 0, 2).timers("\"a\"", &[10, 20, 30]).timers("\"b\"", &[10, 30, 40]).0).unwrap();
    assert_eq!(res[0].status, 0);
    assert_eq!(res[0].emits, vec!["a 10", "a 30"]);
    assert_eq!(h.dump("\"a\""), "count=2 timers=[20, 40]");
    // A failing timer call fails the group: the later timers are not called.
    assert_eq!((res[1].status, res[1].err.as_str(), res[1].emits.len()), (1, "timer boom", 0));
    assert_eq!(h.dump("\"b\""), "timers=[10, 20, 30, 40]");
}

#[test]
fn initial_state() {
    let (mut m, h) = module(TimeoutMode::ProcessingTime);
    let init = r#"{"count": 3, "name": "x", "list": [1, 2], "events": [{"a": [1, 2]}, null], "map": {"b": 2, "a": 1, "b": 5}, "tval": null}"#;
    let res = h.process(&mut m, &Buf::new(1000, 0, 1).initial("\"k\"", init).0).unwrap();
    assert_eq!(res[0].err, "groupstate: initial state of list events: element 1: groupstate: null is not a valid state value");
    let init = r#"{"count": 3, "name": "x", "list": [1, 2], "events": [{"a": [1, 2]}, "s"], "map": {"b": 2, "a": 1, "b": 5}, "tval": null}"#;
    let res = ok(h.process(&mut m, &Buf::new(1000, 0, 1).initial("\"k\"", init).0));
    let want = {
        let mut b = hex("02 00000000 01000000 33  02 01000000 03000000 227822  12 02000000 02000000 01000000 31 01000000 32");
        b.extend(hex("12 03000000 02000000 0b000000"));
        b.extend_from_slice(br#"{"a":[1,2]}"#);
        b.extend(hex("03000000 227322"));
        b.extend(hex("25 04000000  22 04000000 01000000 61 01000000 31  22 04000000 01000000 62 01000000 35"));
        b
    };
    assert_eq!(res[0].ops, want, "VALUE_SET, LIST_PUT, MAP_CLEAR then MAP_SET in key order, compact JSON");
    assert_eq!(h.dump("\"k\""), "count=3 name=\"x\" list=[1,2] events=[{\"a\":[1,2]},\"s\"] map={a:1,b:5}");

    for (init, want) in [
        (r#"{"count": 1, "zz": 1, "aa": 2, "zz": 3}"#, r#"groupstate: initial state names undeclared state variables ["aa" "zz"] (declared: count, name, list, events, map, tval, tlist, tmap)"#),
        ("[1]", "groupstate: initial state is not a JSON object of state variables: [1]"),
        (r#"{"count": "x"}"#, "groupstate: initial state of count: json: want a number, got \"x\""),
        (r#"{"list": {"a": 1}}"#, "groupstate: initial state of list list: want a JSON array, got {\"a\": 1}"),
        (r#"{"map": [1]}"#, "groupstate: initial state of map map: want a JSON object, got [1]"),
        (r#"{"map": {"k": true}}"#, "groupstate: initial state of map map: key \"k\": json: want a number, got true"),
    ] {
        let res = h.process(&mut m, &Buf::new(1000, 0, 1).initial("\"f\"", init).0).unwrap();
        assert_eq!((res[0].status, res[0].err.as_str()), (1, want));
    }
    assert_eq!(h.dump("\"f\""), "");

    // A processor's own handling, reading what the default wrote.
    ON_INITIAL.with(|c| {
        *c.borrow_mut() = Some(Box::new(|v: &Vars, _: &Key, init: &[u8], t: &mut Timers, out: &mut Emitter| {
            assert_eq!(v.count.get_option()?, None);
            apply_initial_state(t, init)?;
            assert_eq!(v.count.get_option()?, Some(8)); // the cache predates the writes
            t.register(7777)?;
            out.emit("custom");
            Ok(())
        }))
    });
    let res = ok(h.process(&mut m, &Buf::new(1000, 0, 1).initial("\"g\"", r#"{"count": 8}"#).0));
    assert_eq!(res[0].emits, vec!["custom"]);
    assert_eq!(h.dump("\"g\""), "count=8 timers=[7777]");
}

#[test]
fn ttl() {
    let (mut m, h) = module(TimeoutMode::ProcessingTime);
    let decls: Vec<_> = h.0.borrow().decls.iter().map(|d| (d.0.clone(), d.1, d.2)).collect();
    assert_eq!(decls[5..].to_vec(), vec![("tval".to_string(), 1, 1000), ("tlist".to_string(), 2, 1000), ("tmap".to_string(), 3, 1000)]);
    on_data(|v, _, _, _, _| {
        v.tval.update(&1)?;
        v.tlist.append(&1)?;
        v.tmap.update("a", &"x".to_string())?;
        v.count.update(&1)?;
        Ok(())
    });
    ok(h.process(&mut m, &Buf::new(1000, 0, 1).data("\"a\"", &["{}"]).0));
    on_data(|v, _, rows, _, out| {
        let _ = rows;
        out.emit(format!(
            "{} {} {} {:?}",
            v.tval.exists()?,
            v.tlist.exists()?,
            v.tmap.exists()?,
            v.tmap.get("a")?
        ));
        Ok(())
    });
    let res = ok(h.process(&mut m, &Buf::new(1999, 0, 1).data("\"a\"", &["{}"]).0));
    assert_eq!(res[0].emits, vec!["true true true Some(\"x\")"]);
    let res = ok(h.process(&mut m, &Buf::new(2000, 0, 1).data("\"a\"", &["{}"]).0));
    assert_eq!(res[0].emits, vec!["false false false None"]);
    assert_eq!(h.dump("\"a\""), "count=1");
}

#[test]
fn process_buffer_errors() {
    let mut m = ProcessorModule::<Scripted>::new();
    m.init(&init_buf(2, TimeoutMode::ProcessingTime, false));
    m.set_state_host(Box::new(ScriptHost { answers: vec![], requests: Rc::new(RefCell::new(Vec::new())) }));
    on_data(|_, _, _, _, _| Ok(()));
    let call = |m: &mut ProcessorModule<Scripted>, b: Vec<u8>| parse_result(m.process(&b)).unwrap_err();
    let pre = "groupstate: process buffer: malformed: ";
    assert_eq!(call(&mut m, Buf::new(1, 0, 2).data("\"a\"", &["{}"]).timers("\"b\"", &[1]).0), format!("{}group 1: kind TIMERS after DATA groups (a process buffer holds one phase)", pre));
    let mut b = Buf::new(1, 0, 1).0;
    put_u32(&mut b, 3);
    put_bytes(&mut b, b"1");
    assert_eq!(call(&mut m, b), format!("{}group 0: unknown kind 3", pre));
    assert_eq!(call(&mut m, Buf::new(1, 0, 1).data("\"a\"", &[]).0), format!("{}group 0: DATA group without rows", pre));
    assert_eq!(call(&mut m, Buf::new(1, 0, 1).timers("\"a\"", &[]).0), format!("{}group 0: TIMERS group without timers", pre));
    assert_eq!(call(&mut m, Buf::new(1, 0, 1).timers("\"a\"", &[2, 2]).0), format!("{}group 0: timers not in strictly ascending order at timer 1", pre));
    let mut b = Buf::new(1, 0, 1).timers("\"a\"", &[1, 2]).0;
    b.truncate(b.len() - 1);
    assert_eq!(call(&mut m, b), format!("{}group 0: timers truncated", pre));
    let mut b = Buf::new(1, 0, 1).data("\"a\"", &["{}"]).0;
    b.push(0);
    assert_eq!(call(&mut m, b), format!("{}trailing bytes after 1 groups", pre));
    assert_eq!(call(&mut m, vec![0; 10]), format!("{}process buffer shorter than its header", pre));
    assert_eq!(parse_result(m.process(&Buf::new(1, 0, 0).0)).unwrap().len(), 0);
}

// ---------------------------------------------------------------------------------------------
// The WebAssembly modules: imports and exports

/// A module's function imports as "module.name" and its exported functions' bodies.
fn wasm_info(b: &[u8]) -> (Vec<String>, BTreeMap<String, Vec<u8>>) {
    let (imports, exports, _) = wasm_funcs(b);
    (imports, exports)
}

/// wasm_info, and every function's body (by index, imports excluded). An exported function
/// that only calls others (wasm-ld wraps the exports of a wasi module in calls of the
/// constructors or destructors) is given as the body of the first one it calls that starts
/// with `i32.const`, if any.
fn wasm_funcs(b: &[u8]) -> (Vec<String>, BTreeMap<String, Vec<u8>>, Vec<Vec<u8>>) {
    fn leb(b: &[u8], i: &mut usize) -> u64 {
        let (mut r, mut s) = (0u64, 0);
        loop {
            let x = b[*i];
            *i += 1;
            r |= ((x & 0x7f) as u64) << s;
            s += 7;
            if x < 0x80 {
                return r;
            }
        }
    }
    fn name(b: &[u8], i: &mut usize) -> String {
        let n = leb(b, i) as usize;
        let s = String::from_utf8(b[*i..*i + n].to_vec()).unwrap();
        *i += n;
        s
    }
    assert_eq!(&b[..8], b"\0asm\x01\0\0\0");
    let (mut imports, mut exports, mut bodies) = (Vec::new(), Vec::new(), Vec::new());
    let mut i = 8;
    while i < b.len() {
        let id = b[i];
        i += 1;
        let n = leb(b, &mut i) as usize;
        let mut j = i;
        match id {
            2 => {
                for _ in 0..leb(b, &mut j) {
                    let m = name(b, &mut j);
                    let f = name(b, &mut j);
                    assert_eq!(b[j], 0, "{}.{}: only function imports", m, f);
                    j += 1;
                    leb(b, &mut j);
                    imports.push(format!("{}.{}", m, f));
                }
            }
            7 => {
                for _ in 0..leb(b, &mut j) {
                    let f = name(b, &mut j);
                    let kind = b[j];
                    j += 1;
                    let idx = leb(b, &mut j);
                    if kind == 0 {
                        exports.push((f, idx as usize));
                    }
                }
            }
            10 => {
                for _ in 0..leb(b, &mut j) {
                    let size = leb(b, &mut j) as usize;
                    bodies.push(b[j..j + size].to_vec());
                    j += size;
                }
            }
            _ => {}
        }
        i += n;
    }
    let nimp = imports.len();
    let mut out = BTreeMap::new();
    for (f, idx) in exports {
        let mut body = bodies[idx - nimp].clone();
        // A body of calls only: 0 locals, (0x10 leb)*, 0x0b.
        let mut j = 1;
        let mut targets = Vec::new();
        while body[0] == 0 && j < body.len() && body[j] == 0x10 {
            j += 1;
            targets.push(leb(&body, &mut j) as usize);
        }
        if j == body.len() - 1 && body[j] == 0x0b {
            if let Some(t) = targets.iter().find(|&&t| t >= nimp && bodies[t - nimp].get(1) == Some(&0x41)) {
                body = bodies[t - nimp].clone();
            }
        }
        out.insert(f, body);
    }
    (imports, out, bodies)
}

fn check_module(path: &str, v2: bool) {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {}", path, e));
    let (imports, exports) = wasm_info(&b);
    let host: Vec<&str> = imports.iter().filter(|i| i.starts_with("groupstate.")).map(|s| s.as_str()).collect();
    for i in &imports {
        assert!(i.starts_with("groupstate.") || i.starts_with("wasi_snapshot_preview1."), "{} imports {}", path, i);
    }
    let want: &[&str] = if v2 { &["groupstate.group_begin", "groupstate.state"] } else { &["groupstate.group_begin"] };
    assert_eq!(host, want, "{}", path);
    for e in ["gs_abi_version", "gs_alloc", "gs_init", "gs_process"] {
        assert!(exports.contains_key(e), "{} does not export {}", path, e);
    }
    // gs_abi_version is `i32.const N` (no locals).
    let body = &exports["gs_abi_version"];
    assert_eq!(body, &vec![0x00, 0x41, if v2 { 2 } else { 1 }, 0x0b], "{}: gs_abi_version", path);
}

#[test]
fn wasm_modules() {
    // From the repository root, as make runs the tests.
    for s in ["logincount", "sessions"] {
        let p = format!("samples/{}/rust/{}.wasm", s, s);
        if std::path::Path::new(&p).exists() {
            check_module(&p, false);
        }
    }
    match std::env::var("GROUPSTATE_RUST_V2_MODULES") {
        Ok(dir) => {
            check_module(&format!("{}/pageviews.wasm", dir), true);
            // A v1 module built against the SDK with the feature v2 does not import
            // groupstate.state either: only the v2 entry points reference it.
            check_module(&format!("{}/logincount.wasm", dir), false);
        }
        Err(_) => eprintln!("GROUPSTATE_RUST_V2_MODULES is not set: the v2 modules were not checked (make test-rust builds them)"),
    }
}

// ---------------------------------------------------------------------------------------------
// Several named inputs (init flag HAS_INPUTS)

/// An init buffer v2 with `flags` and, with HAS_INPUTS, the input names after the config.
fn init_buf_inputs(flags: u32, names: &[&str]) -> Vec<u8> {
    let mut b = Vec::new();
    put_u32(&mut b, 2);
    put_u32(&mut b, TimeoutMode::EventTime as u32);
    put_u32(&mut b, flags);
    put_bytes(&mut b, b"test");
    put_bytes(&mut b, b"{}");
    if flags & INIT_HAS_INPUTS != 0 {
        put_u32(&mut b, names.len() as u32);
        for n in names {
            put_bytes(&mut b, n.as_bytes());
        }
    }
    b
}

impl Buf {
    /// A DATA group whose rows carry the index of their input.
    fn data_inputs(mut self, key: &str, rows: &[(u32, &str)]) -> Buf {
        put_u32(&mut self.0, 0);
        put_bytes(&mut self.0, key.as_bytes());
        put_u32(&mut self.0, rows.len() as u32);
        for (input, r) in rows {
            put_u32(&mut self.0, *input);
            put_bytes(&mut self.0, r.as_bytes());
        }
        self
    }
}

thread_local! {
    static INIT_INPUTS: RefCell<Vec<String>> = RefCell::new(Vec::new());
}

/// Records the input names it sees at init, and emits `input:row` for each row (through
/// `with_inputs`) and the rows again through the plain iterator.
struct Inputs;

impl StatefulProcessor for Inputs {
    fn init(h: &mut ProcessorHandle) -> Result<Self, Error> {
        INIT_INPUTS.with(|i| *i.borrow_mut() = h.inputs().to_vec());
        if h.inputs().iter().any(|n| n == "refused") {
            return Err(Error::msg(format!("inputs must not be named refused, got {:?}", h.inputs())));
        }
        Ok(Inputs)
    }
    fn handle_input_rows(&mut self, _: &Key, rows: InputRows, _: &mut Timers, out: &mut Emitter) -> Result<(), Error> {
        assert_eq!(rows.len(), rows.clone().with_inputs().len());
        let names = rows.inputs().join(",");
        out.emit(format!("inputs=[{}]", names));
        for (input, row) in rows.clone().with_inputs() {
            out.emit(format!("{}:{}", input, String::from_utf8_lossy(row)));
        }
        for row in rows {
            out.emit(row);
        }
        Ok(())
    }
}

fn init_message(res: &[u8]) -> (u32, String) {
    let mut r = Reader::new(res);
    let st = r.u32();
    (st, String::from_utf8(r.bytes().to_vec()).unwrap())
}

#[test]
fn inputs_at_init() {
    let mut m = ProcessorModule::<Inputs>::new();
    let res = m.init(&init_buf_inputs(INIT_HAS_WATERMARK | INIT_HAS_INPUTS, &["impressions", "clicks"])).to_vec();
    assert_eq!(init_message(&res), (0, String::new()));
    INIT_INPUTS.with(|i| assert_eq!(*i.borrow(), vec!["impressions".to_string(), "clicks".to_string()]));
    assert_eq!(m.inputs(), &["impressions".to_string(), "clicks".to_string()]);

    // Without HAS_INPUTS: no names (and a module re-initialized forgets the old ones).
    let res = m.init(&init_buf_inputs(INIT_HAS_WATERMARK, &[])).to_vec();
    assert_eq!(init_message(&res), (0, String::new()));
    INIT_INPUTS.with(|i| assert!(i.borrow().is_empty()));
    assert!(m.inputs().is_empty());

    // The processor validates the names: its error fails the init.
    let res = m.init(&init_buf_inputs(INIT_HAS_INPUTS, &["a", "refused"])).to_vec();
    assert_eq!(init_message(&res), (1, "inputs must not be named refused, got [\"a\", \"refused\"]".to_string()));
}

#[test]
fn inputs_init_refused() {
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "unknown flag",
            init_buf_inputs(INIT_HAS_WATERMARK | 4, &[]),
            "groupstate: host sets init flags 0x4 this SDK does not implement (rebuild with a newer SDK)",
        ),
        (
            "unknown flags with inputs",
            init_buf_inputs(INIT_HAS_INPUTS | 0x30, &["a"]),
            "groupstate: host sets init flags 0x30 this SDK does not implement (rebuild with a newer SDK)",
        ),
        ("no inputs", init_buf_inputs(INIT_HAS_INPUTS, &[]), "groupstate: init buffer malformed: input_count 0 (want 1 to 16)"),
        (
            "17 inputs",
            init_buf_inputs(INIT_HAS_INPUTS, &["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q"]),
            "groupstate: init buffer malformed: input_count 17 (want 1 to 16)",
        ),
        ("an empty name", init_buf_inputs(INIT_HAS_INPUTS, &["a", ""]), "groupstate: init buffer malformed: input 1: name is empty"),
        (
            "a long name",
            init_buf_inputs(INIT_HAS_INPUTS, &["abcdefghijklmnopqrstuvwxyz0123456"]),
            "groupstate: init buffer malformed: input 0: name is longer than 32 bytes",
        ),
        (
            "a name with a capital",
            init_buf_inputs(INIT_HAS_INPUTS, &["Clicks"]),
            "groupstate: init buffer malformed: input 0: name does not start with a letter a-z",
        ),
        (
            "a name with a dot",
            init_buf_inputs(INIT_HAS_INPUTS, &["a_b-c.d"]),
            "groupstate: init buffer malformed: input 0: name has a byte other than a-z, 0-9, _ and - at offset 5",
        ),
        (
            "a name twice",
            init_buf_inputs(INIT_HAS_INPUTS, &["a", "b", "a"]),
            "groupstate: init buffer malformed: input 2: name \"a\" already used by input 0",
        ),
        (
            "names missing",
            {
                let mut b = init_buf_inputs(INIT_HAS_INPUTS, &["a"]);
                b.truncate(b.len() - 1);
                b
            },
            "groupstate: init buffer malformed",
        ),
        (
            "trailing bytes",
            {
                let mut b = init_buf_inputs(INIT_HAS_INPUTS, &["a"]);
                b.push(0);
                b
            },
            "groupstate: init buffer malformed",
        ),
        (
            "names without the flag",
            {
                let mut b = init_buf_inputs(0, &[]);
                put_u32(&mut b, 1);
                put_bytes(&mut b, b"a");
                b
            },
            "groupstate: init buffer malformed",
        ),
        (
            "a name not UTF-8",
            {
                let mut b = init_buf_inputs(INIT_HAS_INPUTS, &["ab"]);
                *b.last_mut().unwrap() = 0xff;
                b
            },
            "groupstate: init buffer malformed: input 0: name has a byte other than a-z, 0-9, _ and - at offset 1",
        ),
    ];
    for (name, buf, want) in cases {
        let mut m = ProcessorModule::<Inputs>::new();
        let res = m.init(&buf).to_vec();
        assert_eq!(init_message(&res), (1, want.to_string()), "{}", name);
        // A failed init leaves no processor: process is refused.
        let input = Buf::new(1, 0, 1).data("\"a\"", &["{}"]).0;
        assert!(parse_result(m.process(&input)).is_err(), "{}", name);
    }
}

#[test]
fn inputs_per_row() {
    let mut m = ProcessorModule::<Inputs>::new();
    m.init(&init_buf_inputs(INIT_HAS_WATERMARK | INIT_HAS_INPUTS, &["impressions", "clicks"]));
    let input = Buf::new(1000, 0, 2)
        .data_inputs("\"ad1\"", &[(1, r#"{"c":1}"#), (0, r#"{"i":1}"#), (1, r#"{"c":2}"#)])
        .data_inputs("7", &[(0, r#"{"i":2}"#)])
        .0;
    let res = parse_result(m.process(&input)).unwrap();
    assert_eq!(res.len(), 2);
    assert_eq!(res[0].status, 0, "{}", res[0].err);
    assert_eq!(
        res[0].emits,
        vec![
            "inputs=[impressions,clicks]",
            r#"clicks:{"c":1}"#,
            r#"impressions:{"i":1}"#,
            r#"clicks:{"c":2}"#,
            r#"{"c":1}"#,
            r#"{"i":1}"#,
            r#"{"c":2}"#,
        ]
    );
    assert_eq!(res[1].emits, vec!["inputs=[impressions,clicks]", r#"impressions:{"i":2}"#, r#"{"i":2}"#]);

    // Without HAS_INPUTS a row's input is "" and the rows have no index.
    let mut m = ProcessorModule::<Inputs>::new();
    m.init(&init_buf_inputs(INIT_HAS_WATERMARK, &[]));
    let input = Buf::new(1000, 0, 1).data("\"ad1\"", &[r#"{"c":1}"#]).0;
    let res = parse_result(m.process(&input)).unwrap();
    assert_eq!(res[0].emits, vec!["inputs=[]", r#":{"c":1}"#, r#"{"c":1}"#]);
}

#[test]
fn inputs_bad_rows_refused() {
    let mut m = ProcessorModule::<Inputs>::new();
    m.init(&init_buf_inputs(INIT_HAS_INPUTS, &["impressions", "clicks"]));
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "index out of range",
            Buf::new(1, 0, 2).data_inputs("\"a\"", &[(0, "{}")]).data_inputs("\"b\"", &[(1, "{}"), (2, "{}")]).0,
            "groupstate: process buffer: malformed: group 1: row 1: input index 2 out of range (the deployment has 2 inputs)",
        ),
        (
            "huge index",
            Buf::new(1, 0, 1).data_inputs("\"a\"", &[(u32::MAX, "{}")]).0,
            "groupstate: process buffer: malformed: group 0: row 0: input index 4294967295 out of range (the deployment has 2 inputs)",
        ),
        (
            "rows without their index",
            Buf::new(1, 0, 1).data("\"a\"", &["x"]).0, // index 1, then a short length
            "groupstate: process buffer: malformed: group 0: rows truncated",
        ),
        (
            "index without its row",
            {
                let mut b = Buf::new(1, 0, 1).0;
                put_u32(&mut b, 0);
                put_bytes(&mut b, b"\"a\"");
                put_u32(&mut b, 1);
                put_u32(&mut b, 0);
                b
            },
            "groupstate: process buffer: malformed: group 0: rows truncated",
        ),
    ];
    for (name, input, want) in cases {
        assert_eq!(parse_result(m.process(&input)).unwrap_err(), want, "{}", name);
    }
    // TIMERS and INITIAL groups are unchanged by HAS_INPUTS.
    let input = Buf::new(1, 0, 1).timers("\"a\"", &[5]).0;
    assert!(parse_result(m.process(&input)).is_ok());
}

#[test]
fn input_rows_native() {
    let names = vec!["x".to_string(), "y".to_string()];
    let enc = InputRows::encode(&[(1, b"r1"), (0, b"r2")]);
    let got: Vec<(&str, &[u8])> = InputRows::new(&enc, 2, &names).with_inputs().collect();
    assert_eq!(got, vec![("y", &b"r1"[..]), ("x", &b"r2"[..])]);
    let enc = Rows::encode(&[b"r1"]);
    let got: Vec<(&str, &[u8])> = InputRows::new(&enc, 1, &[]).with_inputs().collect();
    assert_eq!(got, vec![("", &b"r1"[..])]);
    // A short hand-made buffer ends the iteration; an index out of range has no name.
    let enc = InputRows::encode(&[(5, b"r1")]);
    let got: Vec<(&str, &[u8])> = InputRows::new(&enc[..enc.len() - 1], 1, &names).with_inputs().collect();
    assert!(got.is_empty());
    let got: Vec<(&str, &[u8])> = InputRows::new(&enc, 1, &names).with_inputs().collect();
    assert_eq!(got, vec![("", &b"r1"[..])]);
}
