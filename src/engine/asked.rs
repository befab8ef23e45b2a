//! What the agent asked, in its own words, for the question comment when
//! it listed no questions: each paragraph of its output that a question
//! signal stands in (the whole question, not the signal's 120-character
//! excerpt or the few words a rule matched), with the list of options
//! that follows one, once each and in the output's order.

use super::question::{Signal, SignalKind};

/// The most characters one passage keeps (the comment quotes less).
const PASSAGE_MAX: usize = 2_000;

/// The paragraphs of `output` that `signals` fired in; a signal found in
/// none (its text was inside something the detector reads apart) is
/// given as its excerpt.
pub fn asking_passages(output: &str, signals: &[Signal]) -> Vec<String> {
    let paragraphs = paragraphs(output);
    let mut picked: Vec<usize> = Vec::new();
    let mut unplaced: Vec<String> = Vec::new();
    for signal in signals
        .iter()
        .filter(|s| s.kind != SignalKind::ExplicitQuestion)
    {
        let stem = signal.excerpt.trim_end_matches('…').trim();
        match paragraphs
            .iter()
            .position(|p| !stem.is_empty() && p.contains(stem))
        {
            Some(i) => {
                picked.push(i);
                if paragraphs.get(i + 1).is_some_and(|p| is_list(p)) {
                    picked.push(i + 1);
                }
            }
            None => unplaced.push(signal.excerpt.clone()),
        }
    }
    picked.sort_unstable();
    picked.dedup();
    let mut passages: Vec<String> = picked
        .into_iter()
        .map(|i| shorten(&paragraphs[i]))
        .collect();
    for excerpt in unplaced {
        if !passages
            .iter()
            .any(|p| p.contains(excerpt.trim_end_matches('…')))
        {
            passages.push(excerpt);
        }
    }
    passages
}

/// The output's paragraphs: runs of lines between blank ones, trimmed.
fn paragraphs(output: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    for line in output.lines() {
        if line.trim().is_empty() {
            if !current.is_empty() {
                out.push(current.join("\n"));
                current.clear();
            }
        } else {
            current.push(line.trim_end());
        }
    }
    if !current.is_empty() {
        out.push(current.join("\n"));
    }
    out
}

/// Whether a paragraph is a list (`1.`, `1)`, `-`, `*` or `+` first).
fn is_list(paragraph: &str) -> bool {
    let t = paragraph.trim_start();
    let digits = t.chars().take_while(char::is_ascii_digit).count();
    let after = &t[digits..];
    (digits > 0 && (after.starts_with(". ") || after.starts_with(") ")))
        || ["- ", "* ", "+ "].iter().any(|m| t.starts_with(m))
}

/// A long paragraph keeps its end, where a question usually stands.
fn shorten(paragraph: &str) -> String {
    let count = paragraph.chars().count();
    if count <= PASSAGE_MAX {
        return paragraph.to_owned();
    }
    let tail: String = paragraph.chars().skip(count - PASSAGE_MAX).collect();
    format!("…{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::question::detect;

    /// The options question the review found quoted as three fragments:
    /// now its paragraph, with the options, once.
    #[test]
    fn a_question_is_quoted_whole_with_its_options() {
        let output = "I looked at the cache.\n\n\
                      Which do you prefer: should I keep the cache, or recompute each time? \
                      Please let me know which one you would like me to use.\n\n\
                      1. keep the cache\n2. recompute\n\nThe rest is done.";
        let verdict = detect(output, false, &[]);
        assert!(verdict.is_asking(), "{verdict:?}");
        assert!(verdict.signals.len() >= 2, "{verdict:?}");
        let passages = asking_passages(output, &verdict.signals);
        assert_eq!(
            passages,
            [
                "Which do you prefer: should I keep the cache, or recompute each time? \
                 Please let me know which one you would like me to use.",
                "1. keep the cache\n2. recompute",
            ],
            "{verdict:?}"
        );
    }

    #[test]
    fn a_signal_in_no_paragraph_is_its_excerpt_and_a_long_paragraph_is_cut() {
        let signal = |excerpt: &str| Signal {
            kind: SignalKind::DirectQuestion,
            weight: 0.6,
            excerpt: excerpt.to_owned(),
        };
        assert_eq!(asking_passages("text", &[signal("gone?")]), ["gone?"]);
        let long = format!("{} ok?", "word ".repeat(600));
        let passages = asking_passages(&long, &[signal("ok?")]);
        assert_eq!(passages[0].chars().count(), PASSAGE_MAX + 1);
        assert!(passages[0].starts_with('…') && passages[0].ends_with("ok?"));
    }
}
