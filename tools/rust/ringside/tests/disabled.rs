//! RINGSIDE_DISABLED=1: a bot that creates no file and writes nothing. Alone in its test binary,
//! since it sets the environment of the whole process.

mod common;

use common::{Collector, ScratchDir};
use ringside::{Bot, Error, Exemplar, Options, Unit};

#[test]
fn ringside_disabled_writes_nothing() {
    std::env::set_var("RINGSIDE_DISABLED", "1");
    let dir = ScratchDir::new("disabled-env");
    let options = || Options { directory: Some(dir.path.clone()), ..Options::default() };
    let bot = Bot::attach_with("rs-disabled", options()).unwrap();
    assert!(!bot.is_enabled());
    assert_eq!(bot.path(), None);
    let latency = bot.histogram("latency", Unit::Nanoseconds, &[]).unwrap();
    let orders = bot.counter("orders", &[]).unwrap();
    let level = bot.gauge("level", Unit::None, &[]).unwrap();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (latency, orders, level) = (latency.clone(), orders.clone(), level.clone());
            std::thread::spawn(move || {
                let order = Exemplar::new(&[("order_id", "A17")]).unwrap();
                for v in 0..1000 {
                    assert!(!latency.record(v));
                    assert!(!latency.record_with_exemplar(v, &order));
                    orders.increment(1);
                    assert!(!level.set(v as f64));
                }
                let _span = latency.span();
                assert!(!latency.span().finish_with_exemplar(&order));
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // Registration still checks its arguments.
    assert!(matches!(bot.histogram("bad name", Unit::None, &[]), Err(Error::InvalidMetricName { .. })));
    // "true" and "yes" disable too, in any case; another value does not.
    for value in ["true", "YES"] {
        std::env::set_var("RINGSIDE_DISABLED", value);
        assert!(!Bot::attach_with(&format!("rs-disabled-{value}"), options()).unwrap().is_enabled());
    }
    assert_eq!(std::fs::read_dir(&dir.path).unwrap().count(), 0, "a disabled bot creates no file");
    std::env::set_var("RINGSIDE_DISABLED", "0");
    assert!(Bot::attach_with("rs-enabled", options()).unwrap().is_enabled());
    std::fs::remove_file(dir.file("rs-enabled")).unwrap();

    let Some(binary) = common::collector_binary() else { return };
    let collector = Collector::start(&binary, &dir);
    collector.wait_for("a few collector passes over the empty directory", |latest| {
        let passes = latest.num("collector.passes")?;
        if passes < 5.0 {
            return Err(format!("{passes} passes"));
        }
        match latest.get("rings").map(|r| r.array().len()) {
            Some(0) => Ok(()),
            other => Err(format!("rings: {other:?}")),
        }
    });
}
