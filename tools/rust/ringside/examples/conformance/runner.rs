//! The case interpreter of the conformance table (Tests/conformance/cases.txt; its head says the
//! operations): runs every case through the crate, each case's bot in a directory. The example
//! `conformance` (main.rs beside it) runs it for the Swift suite; tests/conformance.rs runs it
//! in-process, and compares each case's file with its pin.
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use ringside::{Bot, Counter, Exemplar, Gauge, GaugeMerge, Histogram, Options, Unit};

enum Metric {
    Histogram(Histogram),
    Counter(Counter),
    Gauge(Gauge),
}

fn unit(name: &str) -> Result<Unit, String> {
    match name {
        "none" => Ok(Unit::None),
        "ns" => Ok(Unit::Nanoseconds),
        "us" => Ok(Unit::Microseconds),
        "ms" => Ok(Unit::Milliseconds),
        "s" => Ok(Unit::Seconds),
        "bytes" => Ok(Unit::Bytes),
        _ => Err(format!("unknown unit {name}")),
    }
}

fn merge(name: &str) -> Result<GaugeMerge, String> {
    match name {
        "last" => Ok(GaugeMerge::Last),
        "sum" => Ok(GaugeMerge::Sum),
        "max" => Ok(GaugeMerge::Max),
        "min" => Ok(GaugeMerge::Min),
        "per_worker" => Ok(GaugeMerge::PerWorker),
        _ => Err(format!("unknown merge {name}")),
    }
}

fn number<T: std::str::FromStr>(word: &str) -> Result<T, String> {
    word.parse().map_err(|_| format!("not a number: {word}"))
}

/// The runner's state between lines: the case's bot and its metrics by name.
#[derive(Default)]
struct Runner {
    directory: PathBuf,
    name: String,
    bot: Option<Bot>,
    metrics: HashMap<String, Metric>,
    /// The case's attach was refused, as it asked: its other lines are skipped.
    skipping: bool,
    /// What was refused, as asked: `refused NAME: MESSAGE` (the producer's error), a line each.
    refusals: Vec<String>,
}

impl Runner {
    fn bot(&self) -> Result<&Bot, String> {
        self.bot.as_ref().ok_or_else(|| "no bot attached".to_string())
    }

    fn metric(&self, name: &str) -> Result<&Metric, String> {
        self.metrics.get(name).ok_or_else(|| format!("unknown metric {name}"))
    }

    fn run(&mut self, op: &str, args: &[&str]) -> Result<(), String> {
        match (op, args) {
            ("case", [name]) => {
                self.name = name.to_string();
                self.metrics.clear();
                self.skipping = false;
            }
            _ if self.skipping || op == "plant" => {} // the suite plants
            ("attach", options) => {
                let mut attach = Options { directory: Some(self.directory.clone()), ..Options::default() };
                let mut refused = false;
                for word in options {
                    match word.split_once('=') {
                        Some(("lane_capacity", v)) => attach.lane_capacity = Some(number(v)?),
                        Some(("max_metrics", v)) => attach.max_metrics = Some(number(v)?),
                        Some(("max_lanes", v)) => attach.max_lanes = Some(number(v)?),
                        Some(("worker", v)) => attach.worker = v == "1",
                        Some(("refused", v)) => refused = v == "1",
                        _ => return Err(format!("unknown attach option {word}")),
                    }
                }
                match Bot::attach_with(&self.name, attach) {
                    Ok(_) if refused => return Err(format!("attach of {} was not refused", self.name)),
                    Ok(bot) => self.bot = Some(bot),
                    Err(error) if refused => {
                        self.refusals.push(format!("refused {}: {error}", self.name));
                        self.skipping = true;
                    }
                    Err(error) => return Err(error.to_string()),
                }
            }
            ("histogram" | "counter" | "gauge", [name, options @ ..]) => {
                let mut builder = self.bot()?.metric(name);
                let mut metric_unit = Unit::None;
                for word in options {
                    builder = match word.split_once('=') {
                        Some(("unit", v)) => {
                            metric_unit = unit(v)?;
                            builder
                        }
                        Some(("help", v)) => builder.help(v),
                        Some(("sample_every", v)) => builder.sample_every(number(v)?),
                        Some(("merge", v)) => builder.merge(merge(v)?),
                        Some(("scale", v)) => builder.resolution(number(&format!("1e{v}"))?),
                        Some(("signed", "1")) => builder.signed(),
                        Some(("label", pair)) => {
                            let (key, value) = pair.split_once('=').ok_or(format!("bad label {pair}"))?;
                            builder.label(key, value)
                        }
                        _ => return Err(format!("unknown metric option {word}")),
                    };
                }
                let metric = match op {
                    "histogram" => Metric::Histogram(builder.histogram(metric_unit).map_err(|e| e.to_string())?),
                    "counter" => Metric::Counter(builder.counter().map_err(|e| e.to_string())?),
                    _ => Metric::Gauge(builder.gauge(metric_unit).map_err(|e| e.to_string())?),
                };
                self.metrics.insert(name.to_string(), metric);
            }
            ("observe", [name, value, exemplar @ ..]) => {
                let Metric::Histogram(histogram) = self.metric(name)? else {
                    return Err(format!("{name} is no histogram"));
                };
                let value = number(value)?;
                if exemplar.is_empty() {
                    histogram.record(value);
                } else {
                    let mut pairs = Vec::new();
                    for word in exemplar {
                        let pair = word.strip_prefix("exemplar=").and_then(|p| p.split_once('='));
                        pairs.push(pair.ok_or(format!("bad exemplar {word}"))?);
                    }
                    let exemplar = Exemplar::new(&pairs).map_err(|e| e.to_string())?;
                    histogram.record_with_exemplar(value, &exemplar);
                }
            }
            ("observe_value", [name, value]) => {
                let Metric::Histogram(histogram) = self.metric(name)? else {
                    return Err(format!("{name} is no histogram"));
                };
                histogram.record_value(number(value)?);
            }
            ("count", [name, by]) => {
                let Metric::Counter(counter) = self.metric(name)? else { return Err(format!("{name} is no counter")) };
                counter.increment(number(by)?);
            }
            ("set", [name, value]) => {
                let Metric::Gauge(gauge) = self.metric(name)? else { return Err(format!("{name} is no gauge")) };
                gauge.set(number(value)?);
            }
            ("retire", [name]) => {
                let retired = match self.metric(name)? {
                    Metric::Histogram(histogram) => histogram.retire(),
                    Metric::Counter(counter) => counter.retire(),
                    Metric::Gauge(gauge) => gauge.retire(),
                };
                retired.map_err(|error| error.to_string())?;
            }
            ("end", []) => {
                self.metrics.clear();
                self.bot = None;
            }
            _ => return Err(format!("unknown operation {op}")),
        }
        Ok(())
    }
}

/// Runs the table `text` (the file cases.txt's words) with each case's bot in `directory`: the
/// attaches refused as asked (`refused NAME: MESSAGE`, a line each), or the first operation that
/// failed (`LINE: PROBLEM`, its line number in `text`).
pub fn run_table(text: &str, directory: &Path) -> Result<Vec<String>, String> {
    let mut runner = Runner { directory: directory.to_path_buf(), ..Runner::default() };
    for (number, line) in text.lines().enumerate() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some((op, args)) = words.split_first() else { continue };
        if op.starts_with('#') {
            continue;
        }
        runner.run(op, args).map_err(|problem| format!("{}: {problem}", number + 1))?;
    }
    Ok(runner.refusals)
}
