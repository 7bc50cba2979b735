//! The thread that ends the process retires its lanes: a bot kept to the end (in a `static`) whose
//! main thread recorded leaves that lane retired once main returns, though no pthread key
//! destructor runs for the main thread. Its own harness (`harness = false` in Cargo.toml): the
//! child it runs is this binary, whose main thread must be the one that records and returns.

mod common;

use common::{RingFile, ScratchDir};
use ringside::{Bot, Options, Unit};
use std::process::Command;
use std::sync::OnceLock;

static BOT: OnceLock<Bot> = OnceLock::new();

/// Set in the child's environment: the directory of its bot.
const CHILD_DIR: &str = "RINGSIDE_TEST_PROCESS_EXIT_DIR";

fn main() {
    if let Some(dir) = std::env::var_os(CHILD_DIR) {
        // The child: the bot lives to the end; main records, then returns (exit, its atexit handlers).
        let options = Options { directory: Some(dir.into()), ..Options::default() };
        let bot = BOT.get_or_init(|| Bot::attach_with("rs-exit", options).unwrap());
        assert!(bot.histogram("latency", Unit::Nanoseconds, &[]).unwrap().record(1));
        return;
    }
    let dir = ScratchDir::new("process-exit");
    let status = Command::new(std::env::current_exe().unwrap()).env(CHILD_DIR, &dir.path).status().unwrap();
    assert!(status.success(), "the child failed: {status}");
    let lane = RingFile::read(&dir.file("rs-exit")).lane(0);
    assert_eq!(lane.write_cursor, 1);
    assert_eq!((lane.state, lane.owner_tid), (2, 0), "main's lane is retired when main returns");
    println!("test main_returning_retires_its_lane ... ok");
}
