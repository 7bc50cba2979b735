//! The metric handles and their hot paths (`rs_bot_record`, `rs_bot_record_checked_exemplar`,
//! `rs_bot_record_span`, `rs_bot_count`, `rs_bot_set`), and the builder that registers them.

use crate::bot::{Bot, BotRef, Request};
use crate::error::Error;
use crate::exemplar::Exemplar;
use crate::layout::{GaugeMerge, Unit, FLAG_SPAN, KIND_COUNTER, KIND_GAUGE, KIND_HISTOGRAM};
use crate::span_clock;
use std::time::Duration;

/// A histogram: observations in its unit (unsigned integers), from any thread.
#[derive(Clone)]
pub struct Histogram {
    bot: BotRef,
    index: u32,
    sample_every: u32,
    ns_per_unit: u32,
    unit: Unit,
}

/// A counter: increments that add up to an exact total, from any thread, whatever the lanes hold.
#[derive(Clone)]
pub struct Counter {
    bot: BotRef,
    index: u32,
}

/// A gauge: a value set now and then, from any thread; the last one set is kept exactly.
#[derive(Clone)]
pub struct Gauge {
    bot: BotRef,
    index: u32,
}

impl Histogram {
    /// Records an observation in the histogram's unit. Returns true if a record was written;
    /// false if `sample_every` skipped it, if its lane was sampling and gathered it (counted,
    /// with its value, in the lane's gather cell: see "Overload" in the crate's documentation),
    /// if the lane was full or the thread has no lane (a counted drop), or if the bot is disabled
    /// (or this forked child could not become its worker).
    #[inline]
    pub fn record(&self, value: u64) -> bool {
        let writer = self.bot.writer();
        if self.sample_every > 1 && !writer.sample(self.index, self.sample_every) {
            return false;
        }
        writer.write(self.index, KIND_HISTOGRAM, 0, value)
    }

    /// Records an observation with an exemplar that names it (an order id, a trace id): the
    /// value's record, then the exemplar's bytes in the lane's next records (one more per 16
    /// bytes), published together (EXEMPLARS in ringside.h), stamped with CLOCK_MONOTONIC (never
    /// before the call, as the coarse clock may be: CLOCKS in ringside.h). The collector keeps it
    /// if the value is among the slowest of its window, or the latest of its bucket, and exports
    /// it. The exemplar was checked when made, so this never fails and allocates nothing. Returns as
    /// [`Histogram::record`] does; a lane without room for the value and all of its exemplar
    /// drops both, counted once.
    #[inline]
    pub fn record_with_exemplar(&self, value: u64, exemplar: &Exemplar) -> bool {
        let writer = self.bot.writer();
        if self.sample_every > 1 && !writer.sample(self.index, self.sample_every) {
            return false;
        }
        writer.write_exemplar(self.index, value, exemplar.padded(), exemplar.len())
    }

    /// Records a duration converted to the histogram's unit (truncated; saturated at 2^64 - 1).
    /// A histogram whose unit is not a time records nanoseconds.
    #[inline]
    pub fn record_duration(&self, duration: Duration) -> bool {
        self.record(self.units(duration))
    }

    /// [`Histogram::record_duration`] with an exemplar (see [`Histogram::record_with_exemplar`]).
    #[inline]
    pub fn record_duration_with_exemplar(&self, duration: Duration, exemplar: &Exemplar) -> bool {
        self.record_with_exemplar(self.units(duration), exemplar)
    }

    /// A duration in the histogram's unit (truncated; saturated at 2^64 - 1; nanoseconds for a
    /// unit that is not a time).
    #[inline]
    fn units(&self, duration: Duration) -> u64 {
        let value = match self.unit {
            Unit::Microseconds => duration.as_micros(),
            Unit::Milliseconds => duration.as_millis(),
            Unit::Seconds => duration.as_secs() as u128,
            _ => duration.as_nanos(),
        };
        u64::try_from(value).unwrap_or(u64::MAX)
    }

    /// Starts a span: the guard records the time from now to its drop (or [`Span::finish`]),
    /// timed by the span clock ([`SpanClock`](crate::SpanClock): the TSC where it serves, else
    /// CLOCK_MONOTONIC), in the histogram's unit, flagged as a span and stamped with its end in
    /// CLOCK_MONOTONIC nanoseconds, exactly as `rs_bot_record_span` does.
    #[inline]
    pub fn span(&self) -> Span<'_> {
        Span { histogram: self, start: span_clock::start(), done: false }
    }

    #[inline]
    fn record_span(&self, start: u64, exemplar: Option<&Exemplar>) -> bool {
        let (elapsed, end) = span_clock::end(start);
        let value = if self.ns_per_unit > 1 { elapsed / self.ns_per_unit as u64 } else { elapsed };
        let writer = self.bot.writer();
        if self.sample_every > 1 && !writer.sample(self.index, self.sample_every) {
            return false;
        }
        match exemplar {
            None => writer.write_at(self.index, KIND_HISTOGRAM, FLAG_SPAN, value, end),
            Some(exemplar) => {
                writer.write_exemplar_at(self.index, FLAG_SPAN, value, end, exemplar.padded(), exemplar.len())
            }
        }
    }

    /// The histogram's unit.
    pub fn unit(&self) -> Unit {
        self.unit
    }

    /// Its index in the bot's registry.
    pub fn index(&self) -> u32 {
        self.index
    }
}

/// Times a scope into a histogram: see [`Histogram::span`].
#[must_use = "a span records when it is dropped: bind it to a variable (`let _span = ...`)"]
pub struct Span<'a> {
    histogram: &'a Histogram,
    start: u64, // a span clock reading
    done: bool,
}

impl Span<'_> {
    /// Records the span now; returns whether a record was written.
    #[inline]
    pub fn finish(mut self) -> bool {
        self.done = true;
        self.histogram.record_span(self.start, None)
    }

    /// Records the span now with an exemplar that names it (the order it timed: see
    /// [`Histogram::record_with_exemplar`]); returns whether it was written.
    #[inline]
    pub fn finish_with_exemplar(mut self, exemplar: &Exemplar) -> bool {
        self.done = true;
        self.histogram.record_span(self.start, Some(exemplar))
    }

    /// Drops the span without recording it.
    pub fn cancel(mut self) {
        self.done = true;
    }
}

impl Drop for Span<'_> {
    #[inline]
    fn drop(&mut self) {
        if !self.done {
            self.histogram.record_span(self.start, None);
        }
    }
}

impl Counter {
    /// Adds `by` to the counter: exact, even when the lane is full or the thread has none.
    #[inline]
    pub fn increment(&self, by: u64) {
        self.bot.writer().count(self.index, by);
    }

    /// Its index in the bot's registry.
    pub fn index(&self) -> u32 {
        self.index
    }
}

impl Gauge {
    /// Sets the gauge: the last value is kept exactly; a record of it (for windowed min and max)
    /// is written like any other and may drop. Returns true if the record was written.
    #[inline]
    pub fn set(&self, value: f64) -> bool {
        self.bot.writer().set(self.index, value)
    }

    /// Its index in the bot's registry.
    pub fn index(&self) -> u32 {
        self.index
    }
}

/// Registers a metric with labels, help text, sampling or a gauge's merge policy:
/// `bot.metric("name")` then `.label(..)`, `.help(..)`, `.sample_every(..)`, `.merge(..)`, and one
/// of `.histogram(unit)`, `.counter()`, `.gauge(unit)`.
#[must_use = "a builder registers nothing until .histogram(), .counter() or .gauge()"]
pub struct MetricBuilder<'a> {
    bot: &'a Bot,
    name: &'a str,
    labels: Vec<(&'a str, &'a str)>,
    help: &'a str,
    sample_every: u32,
    merge: GaugeMerge,
}

impl<'a> MetricBuilder<'a> {
    pub(crate) fn new(bot: &'a Bot, name: &'a str) -> Self {
        MetricBuilder { bot, name, labels: Vec::new(), help: "", sample_every: 1, merge: GaugeMerge::Last }
    }

    /// Adds a label: a key as a name (`[a-zA-Z_][a-zA-Z0-9_]*`, not starting with `__`), a value
    /// without newline or NUL. At most 256 bytes in all, as stored ("key=value" lines).
    pub fn label(mut self, key: &'a str, value: &'a str) -> Self {
        self.labels.push((key, value));
        self
    }

    /// Adds labels.
    pub fn labels(mut self, labels: &[(&'a str, &'a str)]) -> Self {
        self.labels.extend_from_slice(labels);
        self
    }

    /// Help text, at most 128 bytes, without NUL.
    pub fn help(mut self, help: &'a str) -> Self {
        self.help = help;
        self
    }

    /// Histograms only: write 1 call in `n` (the collector scales counts by `n`).
    pub fn sample_every(mut self, n: u32) -> Self {
        self.sample_every = n;
        self
    }

    /// Gauges only: how the collector merges the gauge across the bot's workers (see
    /// [`GaugeMerge`]; [`GaugeMerge::Last`] unless told). `.merge(GaugeMerge::Sum).gauge(unit)`:
    /// the workers' values add up. A per-worker gauge is labelled `pid` by the collector, so its
    /// own labels may not name `pid` ([`Error::InvalidLabels`]); another kind with a policy is
    /// [`Error::InvalidOption`], and the same gauge registered again with another policy
    /// [`Error::Conflict`].
    pub fn merge(mut self, merge: GaugeMerge) -> Self {
        self.merge = merge;
        self
    }

    fn register(&self, kind: u8, unit: Unit) -> Result<u32, Error> {
        let bot = &self.bot.inner;
        let request =
            Request::new(bot.name(), self.name, kind, unit, &self.labels, self.help, self.sample_every, self.merge)?;
        bot.register(&request)
    }

    /// Registers (or finds again) a histogram.
    pub fn histogram(self, unit: Unit) -> Result<Histogram, Error> {
        let index = self.register(KIND_HISTOGRAM, unit)?;
        Ok(Histogram {
            bot: self.bot.inner.clone(),
            index,
            sample_every: self.sample_every,
            ns_per_unit: unit.ns_per_unit(),
            unit,
        })
    }

    /// Registers (or finds again) a counter (counters have no unit).
    pub fn counter(self) -> Result<Counter, Error> {
        let index = self.register(KIND_COUNTER, Unit::None)?;
        Ok(Counter { bot: self.bot.inner.clone(), index })
    }

    /// Registers (or finds again) a gauge, merged across workers as [`MetricBuilder::merge`] said.
    pub fn gauge(self, unit: Unit) -> Result<Gauge, Error> {
        let index = self.register(KIND_GAUGE, unit)?;
        Ok(Gauge { bot: self.bot.inner.clone(), index })
    }
}

impl Bot {
    /// Starts registering a metric named `name` (see [`MetricBuilder`]).
    pub fn metric<'a>(&'a self, name: &'a str) -> MetricBuilder<'a> {
        MetricBuilder::new(self, name)
    }

    /// Registers (or finds again) a histogram with labels, no help text, every call written.
    pub fn histogram(&self, name: &str, unit: Unit, labels: &[(&str, &str)]) -> Result<Histogram, Error> {
        self.metric(name).labels(labels).histogram(unit)
    }

    /// Registers (or finds again) a counter with labels.
    pub fn counter(&self, name: &str, labels: &[(&str, &str)]) -> Result<Counter, Error> {
        self.metric(name).labels(labels).counter()
    }

    /// Registers (or finds again) a gauge with labels, merged across workers as the value set
    /// last ([`GaugeMerge::Last`]; `bot.metric(name).merge(..).gauge(unit)` declares another).
    pub fn gauge(&self, name: &str, unit: Unit, labels: &[(&str, &str)]) -> Result<Gauge, Error> {
        self.metric(name).labels(labels).gauge(unit)
    }
}

macro_rules! debug_handle {
    ($type:ident, $kind:literal) => {
        impl std::fmt::Debug for $type {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($type)).field("bot", &self.bot.name()).field("index", &self.index).finish()
            }
        }
    };
}
debug_handle!(Histogram, "histogram");
debug_handle!(Counter, "counter");
debug_handle!(Gauge, "gauge");
