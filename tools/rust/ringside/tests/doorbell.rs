//! The doorbell (DOORBELL in ringside.h): an attached process says in the header's
//! `rings_doorbell` (0x0B4) that it rings; a record, a counter increment or a gauge set that finds
//! the header's `doorbell` (0x140) set clears it, and wakes the real collector asleep on it (its
//! doorbell's wakes move, with the poll at its longest); with the word 0, a call leaves it 0.
//! Nothing is timed: waits are bounded generously, and only the file and the collector's counters
//! are asserted.

mod common;

use common::{eventually, Collector, ScratchDir};
use ringside::{Bot, Exemplar, Options, Unit};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Duration;

const RINGS_DOORBELL: u64 = 0x0B4;
const DOORBELL: u64 = 0x140;

fn options(dir: &ScratchDir) -> Options {
    Options { directory: Some(dir.path.clone()), ..Options::default() }
}

/// The bot file as the collector sees it: its words read and written through a descriptor of the
/// test's own (the same pages as every mapping of the file).
struct Header(File);

impl Header {
    fn open(path: &Path) -> Header {
        Header(OpenOptions::new().read(true).write(true).open(path).unwrap())
    }

    fn word(&self, offset: u64) -> u32 {
        let mut bytes = [0u8; 4];
        self.0.read_exact_at(&mut bytes, offset).unwrap();
        u32::from_le_bytes(bytes)
    }

    /// Plays the sleeping collector: sets the doorbell.
    fn ring(&self) {
        self.0.write_all_at(&1u32.to_le_bytes(), DOORBELL).unwrap();
    }
}

/// A call that publishes a record or moves a counter, and its name.
type Call = (&'static str, Box<dyn Fn()>);

/// Each call that publishes a record or moves a counter, by name: the fast paths and the slow
/// ones (an exemplar, a signed value, a scaled increment, a span, a thread's first call).
fn calls(bot: &Bot) -> Vec<Call> {
    let latency = bot.histogram("latency", Unit::Nanoseconds, &[]).unwrap();
    let signed = bot.metric("drift").resolution(0.01).signed().histogram(Unit::None).unwrap();
    let orders = bot.counter("orders", &[]).unwrap();
    let fees = bot.metric("fees_usd").resolution(1e-6).counter().unwrap();
    let exposure = bot.gauge("exposure", Unit::None, &[]).unwrap();
    let exemplar = Exemplar::new(&[("order_id", "A17")]).unwrap();
    let (l1, l2, l3) = (latency.clone(), latency.clone(), latency);
    vec![
        ("record", Box::new(move || assert!(l1.record(1200)))),
        ("record with an exemplar", Box::new(move || assert!(l2.record_with_exemplar(1300, &exemplar)))),
        ("span", Box::new(move || assert!(l3.span().finish()))),
        ("signed record", Box::new(move || assert!(signed.record_value(-3.5)))),
        ("increment", Box::new(move || orders.increment(1))),
        ("increment of steps", Box::new(move || fees.increment_value(0.37))),
        ("gauge set", Box::new(move || assert!(exposure.set(1.5)))),
    ]
}

#[test]
fn an_attached_process_says_it_rings() {
    let dir = ScratchDir::new("doorbell-says");
    let _bot = Bot::attach_with("rs-bell", options(&dir)).unwrap();
    let header = Header::open(&dir.file("rs-bell"));
    assert_eq!(header.word(RINGS_DOORBELL), 1, "membarrier's registration works on this kernel");
    assert_eq!(header.word(DOORBELL), 0);
}

#[test]
fn a_record_an_increment_or_a_gauge_clears_a_set_doorbell() {
    let dir = ScratchDir::new("doorbell-clears");
    let bot = Bot::attach_with("rs-bell", options(&dir)).unwrap();
    let header = Header::open(&dir.file("rs-bell"));
    for (name, call) in calls(&bot) {
        header.ring();
        call(); // the first is the thread's first call, which claims the lane
        assert_eq!(header.word(DOORBELL), 0, "{name} left the doorbell set");
    }
}

#[test]
fn calls_leave_a_doorbell_at_rest_alone() {
    let dir = ScratchDir::new("doorbell-rest");
    let bot = Bot::attach_with("rs-bell", options(&dir)).unwrap();
    let header = Header::open(&dir.file("rs-bell"));
    for (name, call) in calls(&bot) {
        call();
        assert_eq!(header.word(DOORBELL), 0, "{name} set the doorbell");
    }
}

fn family(collector: &Collector, name: &str) -> f64 {
    let page = collector.get("/metrics").unwrap_or_default();
    page.lines()
        .find_map(|line| line.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')))
        .and_then(|value| value.parse().ok())
        .unwrap_or(0.0)
}

/// `what`, one of `calls`, wakes the real collector asleep on the doorbell, its poll at the
/// longest it takes (10 s): a wake is the doorbell's, never the poll's.
fn wakes_a_sleeping_collector(what: &str) {
    let binary = collector_or_skip!();
    let dir = ScratchDir::new("doorbell-wakes");
    let bot = Bot::attach_with("rs-bell", options(&dir)).unwrap();
    let calls = calls(&bot);
    let call = &calls.iter().find(|(name, _)| *name == what).unwrap().1;
    call(); // the lane claimed
    let collector = Collector::start_with(&binary, &dir, &["--poll", "10s"]);
    let asleep = eventually("the collector asleep on the doorbell", Duration::from_secs(20), || {
        match family(&collector, "ringside_collector_doorbell_sleeps_total") {
            sleeps if sleeps > 0.0 => Ok(()),
            _ => Err("no sleep yet".to_string()),
        }
    });
    asleep.unwrap_or_else(|reason| panic!("{reason}\ncollector log:\n{}", collector.log()));
    let before = family(&collector, "ringside_collector_doorbell_wakes_total");
    let woken = eventually(&format!("a wake by {what}"), Duration::from_secs(20), || {
        // A call while the collector is between sleeps is drained by its look and wakes nothing:
        // the next one, once it fell asleep again, does.
        call();
        eventually("the wake", Duration::from_secs(1), || {
            let wakes = family(&collector, "ringside_collector_doorbell_wakes_total");
            if wakes > before {
                Ok(())
            } else {
                Err(format!("wakes still {wakes}"))
            }
        })
    });
    woken.unwrap_or_else(|reason| panic!("{reason}\ncollector log:\n{}", collector.log()));
}

#[test]
fn a_record_wakes_a_sleeping_collector() {
    wakes_a_sleeping_collector("record");
}

#[test]
fn an_increment_wakes_a_sleeping_collector() {
    wakes_a_sleeping_collector("increment");
}

#[test]
fn a_gauge_set_wakes_a_sleeping_collector() {
    wakes_a_sleeping_collector("gauge set");
}
