//! Ringside for Rust (docs to come).

mod bot;
mod error;
mod layout;
mod metrics;
mod shm;
mod sys;

pub use bot::{Bot, Options, MAX_BOTS_PER_PROCESS};
pub use error::Error;
pub use layout::Unit;
pub use metrics::{Counter, Gauge, Histogram, MetricBuilder, Span};
