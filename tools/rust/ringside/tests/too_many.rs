//! A process holds at most 64 bots at once. Alone in its test binary: the limit is the process's.

use ringside::{Bot, Error, Options, MAX_BOTS_PER_PROCESS};

#[test]
fn a_process_holds_at_most_64_bots() {
    let disabled = || Options { disabled: true, ..Options::default() };
    let mut bots: Vec<Bot> =
        (0..MAX_BOTS_PER_PROCESS).map(|i| Bot::attach_with(&format!("rs-many-{i}"), disabled()).unwrap()).collect();
    let error = Bot::attach_with("rs-one-more", disabled()).unwrap_err();
    assert!(matches!(error, Error::TooManyBots { .. }), "{error:?}");
    assert_eq!(error.to_string(), "bot rs-one-more: the process already holds 64 bots; drop one first");
    // A handle keeps its bot: dropping the Bot alone frees no slot.
    let handle = bots[0].counter("orders", &[]).unwrap();
    bots.remove(0);
    assert!(matches!(Bot::attach_with("rs-one-more", disabled()), Err(Error::TooManyBots { .. })));
    drop(handle);
    let one_more = Bot::attach_with("rs-one-more", disabled()).unwrap();
    one_more.counter("orders", &[]).unwrap().increment(1);
}
