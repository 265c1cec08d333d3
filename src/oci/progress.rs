//! Progress bars on stderr for pushes and pulls (indicatif), hidden when stderr is not a
//! terminal or when the user asked for quiet output.

use std::io::IsTerminal as _;
use std::pin::Pin;
use std::task::{Context, Poll};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A set of progress bars drawn together on stderr, or drawn nowhere.
#[derive(Clone)]
pub struct Progress {
    multi: Option<MultiProgress>,
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress").field("visible", &self.multi.is_some()).finish()
    }
}

impl Progress {
    /// Bars on stderr unless `quiet` or stderr is not a terminal.
    pub fn new(quiet: bool) -> Self {
        if quiet || !std::io::stderr().is_terminal() {
            return Progress { multi: None };
        }
        Progress { multi: Some(MultiProgress::with_draw_target(ProgressDrawTarget::stderr())) }
    }

    /// A bar of `len` bytes labelled `message` (hidden when this set is hidden).
    pub fn bytes_bar(&self, len: u64, message: String) -> ProgressBar {
        let Some(multi) = &self.multi else {
            return ProgressBar::hidden();
        };
        let bar = multi.add(ProgressBar::new(len));
        if let Ok(style) =
            ProgressStyle::with_template("{msg:40!} [{bar:30}] {bytes:>10}/{total_bytes:<10} {bytes_per_sec:>12}")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(message);
        bar
    }
}

/// An in-memory `AsyncWrite` sink that advances a progress bar by the bytes written and fails
/// as soon as more than `limit` bytes arrive (setting `overflowed`), so that a registry sending
/// more than a blob's declared size is cut off at once.
pub(crate) struct BarWriter {
    pub(crate) buf: Vec<u8>,
    pub(crate) bar: ProgressBar,
    pub(crate) limit: u64,
    pub(crate) overflowed: bool,
}

impl tokio::io::AsyncWrite for BarWriter {
    fn poll_write(mut self: Pin<&mut Self>, _cx: &mut Context<'_>, data: &[u8]) -> Poll<std::io::Result<usize>> {
        if (self.buf.len() + data.len()) as u64 > self.limit {
            self.overflowed = true;
            return Poll::Ready(Err(std::io::Error::other(format!("more bytes than the {} declared", self.limit))));
        }
        self.buf.extend_from_slice(data);
        self.bar.inc(data.len() as u64);
        Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
