//! A first bot: `RINGSIDE_DIR=/tmp/x cargo run --example first_bot`, with a collector reading
//! the same directory.
use ringside::{Bot, Unit};
use std::time::Duration;

fn main() -> Result<(), ringside::Error> {
    let bot = Bot::attach("rs-first-bot")?;
    let fill = bot.metric("order_fill_latency").label("symbol", "AAPL").help("Order to fill").histogram(Unit::Microseconds)?;
    let orders = bot.counter("orders", &[("side", "buy")])?;
    let exposure = bot.gauge("gross_exposure", Unit::None, &[])?;
    for i in 0..100u64 {
        let _span = fill.span(); // records the time to the end of this block, in microseconds
        std::thread::sleep(Duration::from_millis(10));
        orders.increment(1);
        exposure.set(1.25e6 + i as f64);
    }
    println!("wrote to {}", bot.path().map_or("(disabled)".into(), |p| p.display().to_string()));
    Ok(())
}
