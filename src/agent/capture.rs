//! Reading a child's output stream under a cap: the first bytes are kept,
//! and with `keep_end` the last ones too — an agent's final report (Claude
//! Code's `result`, Codex's last `agent_message` and usage, OpenCode's
//! last step) comes at the end of a stream that tool results can fill past
//! any cap. Every complete line is also handed to the observer, kept or
//! not, so a tool watched for its progress is watched to its end.

use std::collections::VecDeque;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::watch;

use super::process::Captured;

/// The longest line the observer is handed; the rest of a longer one is
/// dropped (a tool result that large says nothing about progress).
const LINE_MAX: usize = 1024 * 1024;

/// Reads `stream` to its end (or until told to stop) and keeps at most
/// `cap` bytes of it: the start, or with `keep_end` the first and the last
/// half of the cap; what falls between is counted, not kept. Each complete
/// line is sent to `lines`, when given.
pub async fn capture(
    mut stream: impl AsyncRead + Unpin,
    cap: usize,
    keep_end: bool,
    mut stop: watch::Receiver<bool>,
    lines: Option<UnboundedSender<String>>,
) -> Captured {
    let mut kept = Kept::new(cap, keep_end);
    let mut line = Line::default();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let read = tokio::select! {
            read = stream.read(&mut buf) => read,
            _ = stop.wait_for(|stop| *stop) => break,
        };
        let n = match read {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        kept.push(&buf[..n]);
        if let Some(lines) = &lines {
            line.feed(&buf[..n], lines);
        }
    }
    kept.into_captured()
}

/// The bytes kept: the head, then (with `keep_end`) a window on the end.
struct Kept {
    head: Vec<u8>,
    head_cap: usize,
    tail: VecDeque<u8>,
    tail_cap: usize,
    /// Whether the byte before the tail's first one ended a line.
    tail_at_line: bool,
    /// The first byte past the head, once one came.
    after_head: Option<u8>,
    dropped: u64,
}

impl Kept {
    fn new(cap: usize, keep_end: bool) -> Kept {
        let tail_cap = if keep_end { cap / 2 } else { 0 };
        let head_cap = cap - tail_cap;
        Kept {
            head: Vec::with_capacity(head_cap.min(64 * 1024)),
            head_cap,
            tail: VecDeque::new(),
            tail_cap,
            tail_at_line: true,
            after_head: None,
            dropped: 0,
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        let room = self.head_cap - self.head.len();
        let (head, rest) = bytes.split_at(bytes.len().min(room));
        self.head.extend_from_slice(head);
        if self.after_head.is_none() {
            self.after_head = rest.first().copied();
        }
        self.tail.extend(rest);
        let excess = self.tail.len().saturating_sub(self.tail_cap);
        if excess > 0 {
            self.tail_at_line = self.tail[excess - 1] == b'\n';
            self.tail.drain(..excess);
            self.dropped += excess as u64;
        }
    }

    /// The text: all of it when nothing was dropped; else the head, a
    /// line break, and the end from its first whole line on (a line the
    /// window cut into is dropped with what came before it, unless the end
    /// is all one line). With `keep_end`, the head ends at its last whole
    /// line too: the start of an event cut in two is not JSON, and would
    /// read as the tool's own words (a tool result saying "401
    /// Unauthorized" as the tool's failure; decision 242).
    fn into_captured(self) -> Captured {
        let mut tail: Vec<u8> = self.tail.into();
        let mut dropped = self.dropped;
        let mut text = self.head;
        let head_cut = self.after_head.is_some_and(|b| b != b'\n') && !text.ends_with(b"\n");
        if dropped > 0
            && self.tail_cap > 0
            && head_cut
            && let Some(newline) = text.iter().rposition(|b| *b == b'\n')
        {
            dropped += (text.len() - newline - 1) as u64;
            text.truncate(newline + 1);
        }
        if dropped > 0 {
            if !self.tail_at_line
                && let Some(newline) = tail.iter().position(|b| *b == b'\n')
            {
                tail.drain(..=newline);
                dropped += newline as u64 + 1;
            }
            if !tail.is_empty() && !text.ends_with(b"\n") {
                text.push(b'\n');
            }
        }
        text.extend_from_slice(&tail);
        Captured {
            text: String::from_utf8_lossy(&text).into_owned(),
            dropped_bytes: dropped,
        }
    }
}

/// The line being read, for the observer.
#[derive(Default)]
struct Line {
    bytes: Vec<u8>,
}

impl Line {
    /// Adds `bytes`, sending each line they complete.
    fn feed(&mut self, mut bytes: &[u8], lines: &UnboundedSender<String>) {
        while let Some(end) = bytes.iter().position(|b| *b == b'\n') {
            self.take(&bytes[..end]);
            let _ = lines.send(String::from_utf8_lossy(&self.bytes).into_owned());
            self.bytes.clear();
            bytes = &bytes[end + 1..];
        }
        self.take(bytes);
    }

    fn take(&mut self, bytes: &[u8]) {
        let room = LINE_MAX.saturating_sub(self.bytes.len());
        self.bytes
            .extend_from_slice(&bytes[..bytes.len().min(room)]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read(input: &[u8], cap: usize, keep_end: bool) -> (Captured, Vec<String>) {
        let (_stop, stopped) = watch::channel(false);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let captured = capture(input, cap, keep_end, stopped, Some(tx)).await;
        let mut lines = Vec::new();
        while let Ok(line) = rx.try_recv() {
            lines.push(line);
        }
        (captured, lines)
    }

    /// A stream far past the cap: its start and its end are kept (the end
    /// from a whole line on), the middle counted, and the observer was
    /// handed every line. Before, only the start was kept and watched: the
    /// agent's final report, its last line, was lost.
    #[tokio::test]
    async fn past_the_cap_the_start_and_the_end_are_kept_and_every_line_is_watched() {
        let input: String = (0..1000).map(|i| format!("line {i:04}\n")).collect();
        let (captured, lines) = read(input.as_bytes(), 100, true).await;
        let ends = |from: usize, to: usize| -> String {
            (from..=to).map(|i| format!("line {i:04}\n")).collect()
        };
        assert_eq!(captured.text, ends(0, 4) + &ends(995, 999));
        assert_eq!(captured.dropped_bytes, 9900);
        assert_eq!(lines.len(), 1000);
        assert_eq!(lines[999], "line 0999");

        // A window that starts inside a line keeps the end from the next
        // whole line on, and the head ends at its last whole line: a cut
        // line's start (of a JSON event, say) is not kept.
        let (captured, _) = read(input.as_bytes(), 95, true).await;
        assert_eq!(captured.text, ends(0, 3) + &ends(996, 999));
        assert_eq!(captured.dropped_bytes, 10_000 - 40 - 40);
        // A head that ends where its line does keeps that line.
        let (captured, _) = read(input.as_bytes(), 99, true).await;
        assert_eq!(captured.text, ends(0, 3) + "line 0004\n" + &ends(996, 999));

        // Without keep_end (a goal's output): the start only.
        let (captured, _) = read(input.as_bytes(), 100, false).await;
        assert_eq!(captured.text, input[..100]);
        assert_eq!(captured.dropped_bytes as usize, input.len() - 100);
    }

    /// Within the cap nothing changes; a line longer than the observer's
    /// limit is handed over cut, and the next line whole.
    #[tokio::test]
    async fn within_the_cap_all_is_kept_and_a_huge_line_is_watched_cut() {
        // Past the head's half but within the cap: all of it, no line split
        // where the head ends.
        let most: String = (0..8).map(|i| format!("line {i:04}\n")).collect();
        let (captured, _) = read(most.as_bytes(), 100, true).await;
        assert_eq!(
            (captured.text.as_str(), captured.dropped_bytes),
            (most.as_str(), 0)
        );
        // One line far past the cap: its start and its end.
        let (captured, _) = read("x".repeat(1_000).as_bytes(), 100, true).await;
        let halves = format!("{}\n{}", "x".repeat(50), "x".repeat(50));
        assert_eq!((captured.text, captured.dropped_bytes), (halves, 900));
        let (captured, lines) = read(b"a\nb", 100, true).await;
        assert_eq!(
            (captured.text.as_str(), captured.dropped_bytes),
            ("a\nb", 0)
        );
        assert_eq!(lines, ["a"], "an unfinished line is not handed over");

        let huge = format!("{}\nnext\n", "x".repeat(LINE_MAX + 10));
        let (_, lines) = read(huge.as_bytes(), 1024, true).await;
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].len(), LINE_MAX);
        assert_eq!(lines[1], "next");
    }
}
