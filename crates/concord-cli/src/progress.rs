//! Progress of long writes on stderr, when it is a terminal: rows taken from the input,
//! bytes written, and the rate (for a compaction, the groups rewritten). Nothing when
//! stderr is a file or a pipe.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::{Duration, Instant};

use concord::{ProgressFn, WriteProgress};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A spinner line on stderr, cleared when dropped.
pub struct Bar {
    bar: ProgressBar,
    started: Instant,
}

impl Bar {
    /// A bar, if stderr is a terminal.
    pub fn for_terminal() -> Option<Bar> {
        if !std::io::stderr().is_terminal() {
            return None;
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr_with_hz(4));
        bar.set_style(ProgressStyle::with_template("{spinner} {msg}").expect("a valid template"));
        bar.enable_steady_tick(Duration::from_millis(250));
        Some(Bar { bar, started: Instant::now() })
    }

    /// The function the library tells its progress.
    pub fn reporter(&self) -> ProgressFn {
        let (bar, started) = (self.bar.clone(), self.started);
        Arc::new(move |p: WriteProgress| {
            let seconds = started.elapsed().as_secs_f64().max(1e-3);
            if p.groups > 0 {
                return bar.set_message(format!("compact: rewrote {} of {} groups", p.groups_rewritten, p.groups));
            }
            bar.set_message(format!(
                "{} rows read, {} written, {} rows/s",
                p.rows,
                indicatif::HumanBytes(p.bytes_written),
                (p.rows as f64 / seconds).round() as u64
            ));
        })
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}
