//! The metric handles and their hot paths (`rs_bot_record`, `rs_bot_record_checked_exemplar`,
//! `rs_bot_record_span`, `rs_bot_record_signed`, `rs_bot_record_value`, `rs_bot_count`,
//! `rs_bot_count_value`, `rs_bot_set`), and the builder that registers them.

use crate::bot::{Bot, BotRef, Request, ValuesAsked};
use crate::error::Error;
use crate::exemplar::Exemplar;
use crate::layout::{
    power_of_ten, GaugeMerge, Unit, CONTROL_BOT_OFF, CONTROL_OFF, CONTROL_SAMPLE, FLAG_SPAN, KIND_COUNTER, KIND_GAUGE,
    KIND_HISTOGRAM, OFFSET_BINARY_BIAS, WEIGHT_LOG2_MAX,
};
use crate::shm::{Controlled, Refusal, Writer};
use crate::span_clock;
use std::time::Duration;

/// 2^63 and 2^64 as doubles (exact): the bounds of what a signed and an unsigned metric hold, in steps.
const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;

/// `x` rounded to the nearest whole number, ties to even: C's `rint` in the default rounding mode,
/// which is `f64::round_ties_even`, but inline without SSE4.1's `roundsd` (x86-64's baseline
/// lacks it, and `round_ties_even` then jumps to libm's `rint`, a call per value). Adding 2^52 to
/// |x| < 2^52 leaves no bit below the units, so the sum is rounded once to the nearest whole
/// number, ties to even (2^52 is even), and taking 2^52 away again is exact; a double of 2^52 or
/// more is a whole number already.
#[inline(always)]
fn rint(x: f64) -> f64 {
    const TWO_POW_52: f64 = 4_503_599_627_370_496.0;
    let magnitude = x.abs();
    if magnitude < TWO_POW_52 {
        ((magnitude + TWO_POW_52) - TWO_POW_52).copysign(x)
    } else {
        x
    }
}

/// A histogram: observations in its unit, whole numbers of its resolution's steps (unsigned
/// unless registered `signed()`), from any thread.
#[derive(Clone)]
pub struct Histogram {
    bot: BotRef,
    index: u32,
    sample_every: u32,
    ns_per_unit: u32,
    unit: Unit,
    /// Registered signed (`RS_FORM_SIGNED`): `record_signed` and `record_value` take it, `record`
    /// (unsigned steps) refuses it, as C's `rs_bot_record` does.
    signed: bool,
    /// A value is a whole number of 10^scale of the unit.
    scale: i8,
    /// 10^-scale: what a value in the unit is multiplied by to count its steps.
    steps_per_unit: f64,
}

/// A counter: increments that add up to an exact total, from any thread, whatever the lanes hold.
#[derive(Clone)]
pub struct Counter {
    bot: BotRef,
    index: u32,
    /// An increment is a whole number of 10^scale (its resolution).
    scale: i8,
    /// 10^-scale: what an increment is multiplied by to count its steps.
    steps_per_unit: f64,
}

/// A gauge: a value set now and then, from any thread; the last one set is kept exactly.
#[derive(Clone)]
pub struct Gauge {
    bot: BotRef,
    index: u32,
}

impl Histogram {
    /// Retires the series, as prometheus_client's `remove()` (RETIRING A SERIES in ringside.h,
    /// `rs_bot_retire`): the collector drops it from every page and lets go of what it kept;
    /// registering the same name and labels again revives it (a new series to the collector:
    /// a counter from zero). Calls through it meanwhile are dropped by the collector (counted).
    /// Takes the bot's registration lock: not for the hot path.
    pub fn retire(&self) -> Result<(), Error> {
        self.bot.retire(self.index)
    }

    /// Records an observation in the histogram's unit, as a whole number of its steps (of its
    /// unit, unless registered with a [`resolution`](MetricBuilder::resolution)). Returns true if
    /// a record was written; false if `sample_every` skipped it, if its lane was sampling and
    /// gathered it (counted, with its value, in the lane's gather cell: see "Overload" in the
    /// crate's documentation), if the lane was full or the thread has no lane (a counted drop), if
    /// the bot is disabled (or this forked child could not become its worker), or if the
    /// histogram is signed (it takes [`record_signed`](Histogram::record_signed) and
    /// [`record_value`](Histogram::record_value), as C's `rs_bot_record` refuses it).
    #[inline(always)] // the hot path: kept inline where it is called from, as C's rs_bot_record is
    pub fn record(&self, value: u64) -> bool {
        if self.signed {
            return false;
        }
        self.write_stored(value)
    }

    /// Writes a value as the file stores it (an unsigned value, or a signed one's offset binary),
    /// past the operator's control and the "1 in N": `record`'s and `record_signed`'s common end.
    #[inline(always)] // the hot path, as `record`
    fn write_stored(&self, value: u64) -> bool {
        let writer = self.bot.writer();
        let control = writer.control(self.index);
        if control != 0 {
            return self.record_controlled(writer, control, value, None, None);
        }
        if self.sample_every > 1 && !writer.sample(self.index, self.sample_every) {
            return false;
        }
        writer.write(self.index, KIND_HISTOGRAM, 0, value)
    }

    /// A call whose metric's control word is not zero (CONTROL in ringside.h): nothing when the
    /// metric or the bot is off; else, past the "1 in N", the operator's sampling, 1 in 2^n,
    /// decides (`Writer::control_sample`): gathered, written with its weight and without its
    /// exemplar, or written as usual. `span_end`: a span's end, for the span's flag and stamp.
    #[cold]
    #[inline(never)]
    fn record_controlled(
        &self,
        writer: &Writer,
        control: u32,
        value: u64,
        span_end: Option<u64>,
        exemplar: Option<&Exemplar>,
    ) -> bool {
        if control & (CONTROL_OFF | CONTROL_BOT_OFF) != 0 {
            return false;
        }
        if self.sample_every > 1 && !writer.sample(self.index, self.sample_every) {
            return false;
        }
        let n = (control & CONTROL_SAMPLE).min(WEIGHT_LOG2_MAX);
        let flags = match writer.control_sample(self.index, value, n) {
            Controlled::Gathered => return false,
            Controlled::Weighted(flags) => flags,
            Controlled::Ordinary => {
                return match (span_end, exemplar) {
                    (None, None) => writer.write(self.index, KIND_HISTOGRAM, 0, value),
                    (None, Some(e)) => writer.write_exemplar(self.index, value, e.padded(), e.len()),
                    (Some(end), None) => writer.write_at(self.index, KIND_HISTOGRAM, FLAG_SPAN, value, end),
                    (Some(end), Some(e)) => {
                        writer.write_exemplar_at(self.index, FLAG_SPAN, value, end, e.padded(), e.len())
                    }
                };
            }
        };
        match span_end {
            None => writer.write(self.index, KIND_HISTOGRAM, flags, value),
            Some(end) => writer.write_at(self.index, KIND_HISTOGRAM, flags | FLAG_SPAN, value, end),
        }
    }

    /// Records an observation with an exemplar that names it (an order id, a trace id): the
    /// value's record, then the exemplar's bytes in the lane's next records (one more per 16
    /// bytes), published together (EXEMPLARS in ringside.h), stamped with CLOCK_MONOTONIC (never
    /// before the call, as the coarse clock may be: CLOCKS in ringside.h). The collector keeps it
    /// if the value is among the slowest of its window, or the latest of its bucket, and exports
    /// it. The exemplar was checked when made, so this never fails and allocates nothing. Returns as
    /// [`Histogram::record`] does; a lane without room for the value and all of its exemplar
    /// drops both, counted once.
    /// A signed histogram's values carry no exemplars, in every language: its `value` (steps, at
    /// most 2^63 - 1) is recorded without it and the exemplar counted in the metric cell's
    /// `exemplars_refused`, as C's `rs_bot_record_checked_exemplar` does.
    #[inline]
    pub fn record_with_exemplar(&self, value: u64, exemplar: &Exemplar) -> bool {
        if self.signed {
            return self.refuse_exemplar(value);
        }
        let writer = self.bot.writer();
        let control = writer.control(self.index);
        if control != 0 {
            return self.record_controlled(writer, control, value, None, Some(exemplar));
        }
        if self.sample_every > 1 && !writer.sample(self.index, self.sample_every) {
            return false;
        }
        writer.write_exemplar(self.index, value, exemplar.padded(), exemplar.len())
    }

    /// A signed histogram's exemplar refused and counted, its value recorded without it.
    #[cold]
    #[inline(never)]
    fn refuse_exemplar(&self, value: u64) -> bool {
        self.bot.count_refused(self.index, Refusal::Exemplar);
        self.record_signed(value.min(i64::MAX as u64) as i64)
    }

    /// Records a duration converted to the histogram's unit (truncated to its steps; saturated
    /// at 2^64 - 1). A histogram whose unit is not a time records nanoseconds. A signed histogram
    /// records nothing (false), as [`Histogram::record`].
    #[inline]
    pub fn record_duration(&self, duration: Duration) -> bool {
        self.record(self.units(duration))
    }

    /// [`Histogram::record_duration`] with an exemplar (see [`Histogram::record_with_exemplar`]).
    #[inline]
    pub fn record_duration_with_exemplar(&self, duration: Duration, exemplar: &Exemplar) -> bool {
        self.record_with_exemplar(self.units(duration), exemplar)
    }

    /// A duration in the histogram's steps (truncated; saturated at 2^64 - 1; nanoseconds for a
    /// unit that is not a time).
    #[inline]
    fn units(&self, duration: Duration) -> u64 {
        if self.scale != 0 {
            return self.steps_of_nanos(duration.as_nanos());
        }
        let value = match self.unit {
            Unit::Microseconds => duration.as_micros(),
            Unit::Milliseconds => duration.as_millis(),
            Unit::Seconds => duration.as_secs() as u128,
            _ => duration.as_nanos(),
        };
        u64::try_from(value).unwrap_or(u64::MAX)
    }

    /// `nanos` in the steps of a scaled histogram, 10^scale of its unit (truncated; saturated at
    /// 2^64 - 1): exact integer arithmetic, a millisecond histogram of resolution 0.001 records
    /// 1,500 steps for 1.5 ms.
    #[cold]
    fn steps_of_nanos(&self, nanos: u128) -> u64 {
        let ns_per_unit = self.ns_per_unit as u128;
        let steps = if self.scale < 0 {
            // 10^18 at most: nanos up to 2^64 s (about 1.8e28 ns) could overflow, then saturate.
            nanos.checked_mul(10u128.pow(self.scale.unsigned_abs() as u32)).map_or(u128::MAX, |n| n / ns_per_unit)
        } else {
            nanos / (ns_per_unit * 10u128.pow(self.scale as u32))
        };
        u64::try_from(steps).unwrap_or(u64::MAX)
    }

    /// Records a signed histogram's value as a whole number of its steps, -(2^63 - 1) to
    /// 2^63 - 1 (`rs_bot_record_signed`): stored as its offset binary, the top bit flipped
    /// (VALUES in ringside.h). `i64::MIN` is clamped to -(2^63 - 1) and counted in the metric
    /// cell's `clamped`. Returns as [`Histogram::record`] does; false for a histogram that is not
    /// signed.
    #[inline(always)]
    pub fn record_signed(&self, steps: i64) -> bool {
        if !self.signed {
            return false;
        }
        if steps == i64::MIN {
            return self.record_unrepresentable(-9.3e18);
        }
        self.write_stored((steps as u64) ^ OFFSET_BINARY_BIAS)
    }

    /// Records a value in the histogram's unit (a slippage of -3.5 basis points), signed or not
    /// (`rs_bot_record_value`): rounded to the nearest step, ties to even. A value the histogram
    /// cannot hold (below 0 for an unsigned one, beyond 2^64 - 1 or +-(2^63 - 1) steps, an
    /// infinity) is clamped to the nearest end and recorded, and a NaN is not recorded: both are
    /// counted in the metric cell's `clamped`, for the collector to export; never wrapped, never
    /// a panic. Returns as [`Histogram::record`] does.
    #[inline]
    pub fn record_value(&self, value: f64) -> bool {
        let steps = value * self.steps_per_unit;
        if self.signed {
            // Within +-2^63 (exact doubles): the rounded steps stay within the i64 range, and
            // never reach i64::MIN.
            if !(steps > -TWO_POW_63 && steps < TWO_POW_63) {
                return self.record_unrepresentable(value);
            }
            return self.record_signed(rint(steps) as i64);
        }
        if !(0.0..TWO_POW_64).contains(&steps) {
            return self.record_unrepresentable(value);
        }
        self.record(rint(steps) as u64)
    }

    /// The cold part of the value calls (`rs_bot_record_unrepresentable`): counted in `clamped`,
    /// then recorded at the nearest end (a NaN is not).
    #[cold]
    #[inline(never)]
    fn record_unrepresentable(&self, value: f64) -> bool {
        self.bot.count_refused(self.index, Refusal::Value);
        if value.is_nan() {
            return false; // no value to record
        }
        if self.signed {
            return self.record_signed(if value < 0.0 { -i64::MAX } else { i64::MAX });
        }
        self.record(if value < 0.0 { 0 } else { u64::MAX })
    }

    /// Starts a span: the guard records the time from now to its drop (or [`Span::finish`]),
    /// timed by the span clock ([`SpanClock`](crate::SpanClock): the TSC where it serves, else
    /// CLOCK_MONOTONIC), in the histogram's unit (in its steps, for one with a resolution),
    /// flagged as a span and stamped with its end in CLOCK_MONOTONIC nanoseconds, exactly as
    /// `rs_bot_record_span` does. A signed histogram records no span, as in C.
    #[inline]
    pub fn span(&self) -> Span<'_> {
        Span { histogram: self, start: span_clock::start(), done: false }
    }

    #[inline]
    fn record_span(&self, start: u64, exemplar: Option<&Exemplar>) -> bool {
        if self.signed {
            return false;
        }
        let (elapsed, end) = span_clock::end(start);
        let value = if self.scale != 0 {
            self.steps_of_nanos(elapsed as u128)
        } else if self.ns_per_unit > 1 {
            elapsed / self.ns_per_unit as u64
        } else {
            elapsed
        };
        let writer = self.bot.writer();
        let control = writer.control(self.index);
        if control != 0 {
            return self.record_controlled(writer, control, value, Some(end), exemplar);
        }
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

    /// Its step, a power of ten of its unit (1 unless registered with a
    /// [`resolution`](MetricBuilder::resolution)).
    pub fn resolution(&self) -> f64 {
        power_of_ten(self.scale as i32)
    }

    /// Whether it was registered [`signed`](MetricBuilder::signed).
    pub fn is_signed(&self) -> bool {
        self.signed
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
    /// Retires the series, as prometheus_client's `remove()` (RETIRING A SERIES in ringside.h,
    /// `rs_bot_retire`): the collector drops it from every page and lets go of what it kept;
    /// registering the same name and labels again revives it (a new series to the collector:
    /// a counter from zero). Calls through it meanwhile are dropped by the collector (counted).
    /// Takes the bot's registration lock: not for the hot path.
    pub fn retire(&self) -> Result<(), Error> {
        self.bot.retire(self.index)
    }

    /// Adds `by` to the counter: exact, even when the lane is full or the thread has none. `by`
    /// is a whole number of its steps (of its resolution, for a counter registered with one).
    #[inline]
    pub fn increment(&self, by: u64) {
        let writer = self.bot.writer();
        // The operator's "off" (CONTROL in ringside.h): nothing added.
        if writer.control(self.index) & (CONTROL_OFF | CONTROL_BOT_OFF) != 0 {
            return;
        }
        writer.count(self.index, by);
    }

    /// Adds `by` in the counter's unit (0.37 dollars to a counter of resolution 1e-6)
    /// (`rs_bot_count_value`): rounded to the nearest step (ties to even), then exact in steps. An
    /// increment below 0 (a counter never goes back), past 2^64 - 1 steps, an infinity or a NaN is
    /// clamped to the nearest end (nothing for a NaN or below 0, 2^64 - 1 steps above) and counted
    /// in the metric cell's `clamped`, for the collector to export; never a panic.
    #[inline]
    pub fn increment_value(&self, by: f64) {
        let steps = by * self.steps_per_unit;
        if !(0.0..TWO_POW_64).contains(&steps) {
            return self.increment_unrepresentable(by);
        }
        self.increment(rint(steps) as u64);
    }

    /// The cold part of `increment_value` (`rs_bot_count_unrepresentable`).
    #[cold]
    #[inline(never)]
    fn increment_unrepresentable(&self, by: f64) {
        self.bot.count_refused(self.index, Refusal::Value);
        if by > 0.0 {
            self.increment(u64::MAX); // a NaN and a value below 0 add nothing
        }
    }

    /// Its step, a power of ten (1 unless registered with a [`resolution`](MetricBuilder::resolution)).
    pub fn resolution(&self) -> f64 {
        power_of_ten(self.scale as i32)
    }

    /// Its index in the bot's registry.
    pub fn index(&self) -> u32 {
        self.index
    }
}

impl Gauge {
    /// Retires the series, as prometheus_client's `remove()` (RETIRING A SERIES in ringside.h,
    /// `rs_bot_retire`): the collector drops it from every page and lets go of what it kept;
    /// registering the same name and labels again revives it (a new series to the collector:
    /// a counter from zero). Calls through it meanwhile are dropped by the collector (counted).
    /// Takes the bot's registration lock: not for the hot path.
    pub fn retire(&self) -> Result<(), Error> {
        self.bot.retire(self.index)
    }

    /// Sets the gauge: the last value is kept exactly; a record of it (for windowed min and max)
    /// is written like any other and may drop. Returns true if the record was written.
    #[inline]
    pub fn set(&self, value: f64) -> bool {
        let writer = self.bot.writer();
        // The operator's "off" (CONTROL in ringside.h): the gauge is not set.
        if writer.control(self.index) & (CONTROL_OFF | CONTROL_BOT_OFF) != 0 {
            return false;
        }
        writer.set(self.index, value)
    }

    /// Its index in the bot's registry.
    pub fn index(&self) -> u32 {
        self.index
    }
}

/// Registers a metric with labels, help text, sampling, a gauge's merge policy, or signed and
/// fractional values: `bot.metric("name")` then `.label(..)`, `.help(..)`, `.sample_every(..)`,
/// `.merge(..)`, `.resolution(..)`, `.signed()`, and one of `.histogram(unit)`, `.counter()`,
/// `.gauge(unit)`.
#[must_use = "a builder registers nothing until .histogram(), .counter() or .gauge()"]
pub struct MetricBuilder<'a> {
    bot: &'a Bot,
    name: &'a str,
    labels: Vec<(&'a str, &'a str)>,
    help: &'a str,
    sample_every: u32,
    merge: GaugeMerge,
    values: ValuesAsked,
}

impl<'a> MetricBuilder<'a> {
    pub(crate) fn new(bot: &'a Bot, name: &'a str) -> Self {
        MetricBuilder {
            bot,
            name,
            labels: Vec::new(),
            help: "",
            sample_every: 1,
            merge: GaugeMerge::Last,
            values: ValuesAsked::default(),
        }
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

    /// Histograms and counters: values are whole numbers of `resolution` of the unit, a power of
    /// ten from 1e-18 to 1e18 (VALUES in ringside.h): basis points to 0.01, dollars to 1e-6,
    /// thousands with 1000. 1 (whole units) unless told. [`Histogram::record_value`] and
    /// [`Counter::increment_value`] take a value in the unit and round it to the nearest step (a
    /// reader multiplies the steps by the resolution again). Anything but a power of ten in that range, or a
    /// resolution other than 1 on a gauge (a double), is [`Error::InvalidOption`] naming the
    /// metric; the same metric registered again with another resolution, [`Error::Conflict`].
    pub fn resolution(mut self, resolution: f64) -> Self {
        self.values.resolution = resolution;
        self
    }

    /// Histograms only: signed values (slippage, PnL), -(2^63 - 1) to 2^63 - 1 steps, recorded
    /// with [`Histogram::record_signed`] (steps) or [`Histogram::record_value`] (the unit), and
    /// stored as their offset binary (VALUES in ringside.h). Another kind is
    /// [`Error::InvalidOption`] (a counter never goes back; a gauge is a double); the same
    /// histogram registered again unsigned, [`Error::Conflict`].
    pub fn signed(mut self) -> Self {
        self.values.signed = true;
        self
    }

    /// The registration asked for, checked and encoded.
    fn request(&self, kind: u8, unit: Unit) -> Result<Request<'a>, Error> {
        let bot = &self.bot.inner;
        let request = Request::new(
            bot.name(),
            self.name,
            kind,
            unit,
            &self.labels,
            self.help,
            self.sample_every,
            self.merge,
            self.values,
        )?;
        Ok(request)
    }

    /// Registers (or finds again) a histogram.
    pub fn histogram(self, unit: Unit) -> Result<Histogram, Error> {
        let request = self.request(KIND_HISTOGRAM, unit)?;
        let index = self.bot.inner.register(&request)?;
        Ok(Histogram {
            bot: self.bot.inner.clone(),
            index,
            sample_every: self.sample_every,
            ns_per_unit: unit.ns_per_unit(),
            unit,
            signed: self.values.signed,
            scale: request.scale,
            steps_per_unit: power_of_ten(-(request.scale as i32)),
        })
    }

    /// Registers (or finds again) a counter (counters have no unit).
    pub fn counter(self) -> Result<Counter, Error> {
        let request = self.request(KIND_COUNTER, Unit::None)?;
        let index = self.bot.inner.register(&request)?;
        Ok(Counter {
            bot: self.bot.inner.clone(),
            index,
            scale: request.scale,
            steps_per_unit: power_of_ten(-(request.scale as i32)),
        })
    }

    /// Registers (or finds again) a gauge, merged across workers as [`MetricBuilder::merge`] said.
    pub fn gauge(self, unit: Unit) -> Result<Gauge, Error> {
        let request = self.request(KIND_GAUGE, unit)?;
        let index = self.bot.inner.register(&request)?;
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

#[cfg(test)]
mod tests {
    use super::rint;

    #[test]
    fn rint_is_round_ties_even() {
        let mut cases = vec![
            0.0,
            -0.0,
            0.5,
            1.5,
            2.5,
            -0.5,
            -1.5,
            -2.5,
            0.49999999999999994,
            12.5,
            13.500000000000002,
            1e15 + 0.5,
            4_503_599_627_370_495.5,
            4_503_599_627_370_496.0,
            9_007_199_254_740_993.0,
            9.2e18,
            -9.2e18,
            1.8e19,
            f64::MIN_POSITIVE,
            5e-324,
        ];
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..1_000_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let bits = state;
            let x = f64::from_bits(bits);
            if x.is_finite() && x.abs() < 2e19 {
                cases.push(x);
            }
            // Values as people write them: a few decimals, scaled.
            cases.push((bits % 2_000_000) as f64 / 8.0 - 125_000.0);
            cases.push((bits % 100_000_000) as f64 * 0.01 * 100.0);
        }
        for x in cases {
            assert_eq!(rint(x).to_bits(), x.round_ties_even().to_bits(), "{x:e}");
        }
    }
}
