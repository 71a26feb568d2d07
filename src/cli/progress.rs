//! Progress of a cold catalog load (every backup of a location downloaded): a progress bar when stderr is a
//! terminal, else an info log line every few seconds, so that a load of 100k backups is not silent for minutes.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use ferry::bucket::LoadProgress;

/// How often the plain (not a terminal) reporter logs.
const LOG_EVERY: Duration = Duration::from_secs(5);

#[derive(Debug)]
pub enum CatalogProgress {
    Bar(ProgressBar),
    /// When the last line was logged.
    Lines(Mutex<Instant>),
}

impl CatalogProgress {
    /// The bar on a terminal, log lines otherwise.
    pub fn for_stderr() -> Self {
        if std::io::IsTerminal::is_terminal(&std::io::stderr()) { Self::bar() } else { Self::lines() }
    }

    fn bar() -> Self {
        // Hidden until the listing says how many: a location with nothing to fetch never shows one.
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
        let style =
            ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} backups loaded ({per_sec}, {eta} left)")
                .map(|s| s.progress_chars("=> "))
                .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        Self::Bar(bar)
    }

    pub fn lines() -> Self {
        Self::Lines(Mutex::new(Instant::now()))
    }
}

impl LoadProgress for CatalogProgress {
    fn listed(&self, location: &str, to_fetch: usize, reused: usize) {
        match self {
            Self::Bar(bar) => {
                bar.set_prefix(location.to_string());
                bar.set_length(to_fetch as u64);
                bar.set_position(0);
                if to_fetch > 0 {
                    bar.set_draw_target(ProgressDrawTarget::stderr());
                }
            }
            Self::Lines(_) => tracing::info!(location, to_fetch, reused, "location listed"),
        }
    }

    fn fetched(&self, location: &str, done: usize, to_fetch: usize) {
        match self {
            Self::Bar(bar) => {
                bar.set_position(done as u64);
                if done == to_fetch {
                    // Gone once done, so the log lines and the output that follow are not interleaved with it.
                    bar.finish_and_clear();
                }
            }
            Self::Lines(last) => {
                // A poisoned lock only means another reporter call panicked; the time in it is still usable.
                let mut last = last.lock().unwrap_or_else(|e| e.into_inner());
                if last.elapsed() >= LOG_EVERY && done < to_fetch {
                    *last = Instant::now();
                    tracing::info!(location, done, to_fetch, "loading backups");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_follows_the_load_and_clears_when_done() {
        let progress = CatalogProgress::bar();
        progress.listed("shared", 3, 1);
        progress.fetched("shared", 2, 3);
        let CatalogProgress::Bar(bar) = &progress else { panic!("a bar") };
        assert_eq!((bar.position(), bar.length()), (2, Some(3)));
        assert!(!bar.is_finished());
        progress.fetched("shared", 3, 3);
        assert!(bar.is_finished());
    }
}
