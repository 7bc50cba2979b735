//! The Rust producer's runner of the conformance table (Tests/conformance/cases.txt; its head says
//! the operations): runs every case through the crate, each case's bot in DIR (runner.rs).
//!
//!     cargo run --example conformance -- CASES DIR
//!
//! Prints `refused NAME: MESSAGE` for each attach refused as the case asked. Exit status 0: every
//! case ran; 1: an operation failed (stderr names the line); 2: usage.
use std::path::Path;
use std::process::ExitCode;

mod runner;

fn main() -> ExitCode {
    let arguments: Vec<String> = std::env::args().collect();
    let [_, cases, directory] = arguments.as_slice() else {
        eprintln!("usage: conformance CASES DIR");
        return ExitCode::from(2);
    };
    let text = match std::fs::read_to_string(cases) {
        Ok(text) => text,
        Err(error) => {
            eprintln!("{cases}: {error}");
            return ExitCode::from(2);
        }
    };
    match runner::run_table(&text, Path::new(directory)) {
        Ok(refusals) => {
            for refusal in refusals {
                println!("{refusal}");
            }
            ExitCode::SUCCESS
        }
        Err(problem) => {
            eprintln!("{cases}:{problem}");
            ExitCode::from(1)
        }
    }
}
