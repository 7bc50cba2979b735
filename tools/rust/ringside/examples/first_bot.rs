//! The README's first Rust bot, line for line inside `main` (the Swift suite's FirstBotTests checks
//! that, runs it and reads what it writes to `$RINGSIDE_DIR`).
use ringside::{Bot, Unit};

fn send_order() {
    std::thread::sleep(std::time::Duration::from_millis(1));
}

// The README's lines as they stand there, aligned comments and all (FirstBotTests compares them).
#[rustfmt::skip]
fn main() -> Result<(), ringside::Error> {
    let bot = Bot::attach("rs-bot")?;                // /dev/shm/ringside.rs-bot
    let fill = bot.histogram("order_fill_latency", Unit::Microseconds, &[("symbol", "AAPL")])?;
    let orders = bot.counter("orders", &[])?;
    let slippage = bot.metric("slippage_bps").resolution(0.01).signed().histogram(Unit::None)?;
    fill.record(42);                                 // any thread: handles are Clone + Send + Sync
    { let _span = fill.span(); send_order(); }       // the scope's time, on drop
    orders.increment(1);
    slippage.record_value(-3.5);                     // basis points to 0.01: negative when the fill beats the quote
    Ok(())
}
