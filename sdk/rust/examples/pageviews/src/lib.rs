//! pageviews, a transformWithState processor (ABI v2, draft): counts each user's clicks per
//! page (for a day), remembers the last ten pages, and emits a summary after 30 minutes of
//! processing time without clicks. The example of docs/handlers/rust.md; `make test-rust`
//! builds it for wasm32-wasi (into sdk/rust/target) and checks the module's imports and
//! exports. It is not a committed sample: the runtime does not run ABI v2 modules yet.

use std::time::Duration;

use groupstate::json::{Object, ObjectWriter};
use groupstate::{Emitter, Error, InputRows, Key, ListState, MapState, ProcessorHandle, StatefulProcessor, Timers, ValueState};

const IDLE_MS: i64 = 30 * 60 * 1000;

struct PageViews {
    total: ValueState<i64>,
    pages: MapState<i64>,
    recent: ListState<String>,
    w: ObjectWriter,
}

impl StatefulProcessor for PageViews {
    fn init(h: &mut ProcessorHandle) -> Result<Self, Error> {
        Ok(PageViews {
            total: h.value_state("total"),
            pages: h.map_state_with_ttl("pages", Duration::from_secs(24 * 3600)),
            recent: h.list_state("recent"),
            w: ObjectWriter::new(),
        })
    }

    fn handle_input_rows(&mut self, _user: &Key, rows: InputRows, timers: &mut Timers, _out: &mut Emitter) -> Result<(), Error> {
        let mut total = self.total.get_option()?.unwrap_or(0);
        let mut recent = self.recent.get()?;
        for row in rows {
            let page = Object::parse(row)?.str("page")?.unwrap_or_default().into_owned();
            total += 1;
            let n = self.pages.get(&page)?.unwrap_or(0);
            self.pages.update(&page, &(n + 1))?;
            recent.push(page);
        }
        if recent.len() > 10 {
            recent.drain(..recent.len() - 10);
        }
        self.recent.put(&recent)?;
        self.total.update(&total)?;
        // One idle timer: move it to 30 minutes from now.
        for ts in timers.list()? {
            timers.delete(ts)?;
        }
        let now = timers.current_processing_time_ms();
        timers.register(now + IDLE_MS)
    }

    fn handle_expired_timer(&mut self, user: &Key, _timer_ms: i64, _timers: &mut Timers, out: &mut Emitter) -> Result<(), Error> {
        let mut pages = ObjectWriter::new();
        for entry in self.pages.iter() {
            let (page, n) = entry?;
            pages.i64(&page, n);
        }
        let total = self.total.get_option()?.unwrap_or(0);
        out.emit(self.w.clear().raw("user", user.json()).i64("total", total).raw("pages", pages.as_bytes()));
        self.total.clear();
        self.pages.clear();
        self.recent.clear();
        Ok(())
    }
}

groupstate::export_processor!(PageViews);
