//! Question detection: does the agent's output ask the maintainer
//! something? An answer that asks is AWAITING_RESPONSE, not COMPLETE.
//!
//! Code (fenced and inline), block quotes, quoted strings, URLs, HTML
//! comments, closing pleasantries ("let me know if you have any
//! questions", 必要があればお知らせください) and offers of more work after
//! the work is done ("Would you like me to add more tests?") are removed
//! first; then weighted signals in Japanese and
//! English fire, and a score of at least [`THRESHOLD`] means the agent is
//! asking. A question answered in the next line (a rhetorical one) or used as
//! a heading (`#`, or a bold line among bold section headings, another
//! following it) does not count. This module only reads text: it never decides
//! completion on its own and never treats a missing signal as evidence of work.

use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

/// The score at or above which the output is asking.
pub const THRESHOLD: f64 = 0.6;

/// The verdict for an answer-type task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AnswerStatus {
    /// The deliverable is there and nothing is asked.
    Complete,
    /// The output asks the maintainer something.
    AwaitingResponse,
    /// Execution failed.
    Error,
    /// Empty output.
    Incomplete,
}

/// The kinds of signal, with their weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SignalKind {
    /// A sentence ending in `?`/`？`, or a Japanese question ending (0.6).
    DirectQuestion,
    /// A request for confirmation: "should I proceed", よろしいですか (0.8).
    Confirmation,
    /// Numbered options with a request to choose (0.9).
    OptionsSelection,
    /// "Please let me know", 教えてください (0.7).
    LetMeKnow,
    /// The structured output lists questions explicitly (1.0).
    ExplicitQuestion,
}

impl SignalKind {
    /// The rule's weight.
    pub fn weight(self) -> f64 {
        match self {
            SignalKind::DirectQuestion => 0.6,
            SignalKind::Confirmation => 0.8,
            SignalKind::OptionsSelection => 0.9,
            SignalKind::LetMeKnow => 0.7,
            SignalKind::ExplicitQuestion => 1.0,
        }
    }
}

/// One signal that fired, with the text that fired it (for the status comment).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Signal {
    /// What kind.
    pub kind: SignalKind,
    /// Its weight.
    pub weight: f64,
    /// The matching text, at most 120 characters.
    pub excerpt: String,
}

/// The result of looking at one output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuestionVerdict {
    /// The status for an answer-type task.
    pub status: AnswerStatus,
    /// The summed weights of the distinct signals, at most 1.
    pub score: f64,
    /// The signals that fired, at most one per kind.
    pub signals: Vec<Signal>,
}

impl QuestionVerdict {
    /// Whether the output asks the maintainer something.
    pub fn is_asking(&self) -> bool {
        self.status == AnswerStatus::AwaitingResponse
    }
}

/// Judges one agent output. `failed` is true when the agent run itself
/// failed; `explicit_questions` are questions the structured output lists.
pub fn detect(output: &str, failed: bool, explicit_questions: &[String]) -> QuestionVerdict {
    if failed {
        return QuestionVerdict {
            status: AnswerStatus::Error,
            score: 0.0,
            signals: Vec::new(),
        };
    }
    let mut signals = Vec::new();
    if let Some(q) = explicit_questions.iter().find(|q| !q.trim().is_empty()) {
        signals.push(signal(SignalKind::ExplicitQuestion, q));
    }
    let text = strip_non_prose(output);
    signals.extend(text_signals(&text));
    let score = signals.iter().map(|s| s.weight).sum::<f64>().min(1.0);
    let status = if score >= THRESHOLD {
        AnswerStatus::AwaitingResponse
    } else if output.trim().is_empty() {
        AnswerStatus::Incomplete
    } else {
        AnswerStatus::Complete
    };
    QuestionVerdict {
        status,
        score: (score * 100.0).round() / 100.0,
        signals,
    }
}

fn signal(kind: SignalKind, excerpt: &str) -> Signal {
    let mut e: String = excerpt.trim().chars().take(120).collect();
    if excerpt.trim().chars().count() > 120 {
        e.push('…');
    }
    Signal {
        kind,
        weight: kind.weight(),
        excerpt: e,
    }
}

fn re(pattern: &str) -> Regex {
    // The patterns are constants of this file, checked by its tests.
    Regex::new(pattern).unwrap_or_else(|e| panic!("bad built-in pattern {pattern}: {e}"))
}

static INLINE_CODE: LazyLock<Regex> = LazyLock::new(|| re(r"`[^`\n]*`"));
static URL: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)\b(?:https?://|www\.)\S+"));
static HTML_COMMENT: LazyLock<Regex> = LazyLock::new(|| re(r"(?s)<!--.*?-->"));
static QUOTED: LazyLock<Regex> = LazyLock::new(|| {
    re(r#""[^"\n]{0,300}"|“[^”\n]{0,300}”|[「『][^」』\n]{0,300}[」』]\s*(?:と|って|という)"#)
});
static PLEASANTRY: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"(?i)(?:please\s+)?(?:let me know|feel free to (?:ask|reach out|let me know))",
        r"[^.!?\n]*?\bif\s+(?:you\s+)?(?:have|need|want|would like|there (?:are|is))\s+",
        r"(?:any(?:thing)?\s*)?(?:further|other|more|additional|else)?\s*",
        r"(?:questions?|help|changes?|adjustments?|assistance|clarifications?|anything|else|follow-ups?)[^.!?\n]*[.!]?",
        r"|(?:ご不明な点|ご質問|不明点|何か|修正点|ご要望|[^。\n]{0,30}必要)(?:が|など|等|で)?(?:ございましたら|あれば|ありましたら|がありましたら)",
        r"[^。\n]{0,20}(?:お知らせください|教えてください|ご連絡ください|お問い合わせください|お気軽に|(?:深掘り|調査|対応)(?:して)?(?:調査)?(?:します|いたします))[^。\n]*。?"
    ))
});
/// An offer of more work after the work is done ("Would you like me to add
/// more tests?", 他にもテストを追加しましょうか？): not a question that
/// needs an answer. An offer that sets out alternatives ("…, or keep it?")
/// is a decision and stays.
static OFFER: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"(?im)^[^\n?]*?(?:would you like me to|do you want me to|want me to|shall i|should i|",
        r"anything else (?:you'd|you would) like(?: me to)?|is there anything else)",
        r"[^\n?]*?\b(?:also|more|else|further|additional(?:ly)?|another|other)\b[^\n?]*\?[ \t]*$",
        r"|^[^\n?]*?anything else (?:you'd|you would) like[^\n?]*\?[ \t]*$",
        r"|(?:他にも|ほかにも|さらに|追加で|あわせて|併せて)[^。？?\n]*(?:しましょうか|しますか|いたしましょうか|いたしますか)[？?]"
    ))
});

static ANSWER_START: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"(?i)^(?:because|it(?:'s| is| was)\b|this is because|that's because|the answer|answer\s*[:：]|a\s*[:：]|yes\b|no\b|",
        r"short answer|in short|turns out|the reason|the cause|→|",
        r"なぜなら|それは|答えは|理由は|原因は|結論|回答\s*[:：]|はい|いいえ|A\s*[:：])"
    ))
});
static REPORTED_QUESTION: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)^(?:you asked|your question|the question|question|q|ご質問|質問|お問い合わせ)\s*(?:was|は)?\s*[:：]",
    )
});
static LINE_END_QUESTION: LazyLock<Regex> =
    LazyLock::new(|| re(r"[?？][\s)）」』*_]*$|(?:ますか|ですか|でしょうか|ませんか)[。\s]*$"));
static JA_QUESTION: LazyLock<Regex> =
    LazyLock::new(|| re(r"どう(?:します|しましょう)か|どちら(?:にします|を選び)ますか"));
static CONFIRMATION: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"(?i)よろしい(?:です|でしょう)?か|確認(?:させて)?ください|ご確認(?:ください|いただけますか)|",
        r"進めて(?:も)?(?:よい|いい|良い)(?:です|でしょう)?か|問題(?:ない|ありません)(?:です|でしょう)?か|",
        r"please\s+confirm|can you confirm|could you confirm|should i\s+(?:proceed|continue|use|go ahead)|",
        r"do you\s+(?:want|prefer|need)|would you like|shall i\b|is it ok(?:ay)? (?:if|to)|",
        r"are you ok(?:ay)? with|do you approve"
    ))
});
static LET_ME_KNOW: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"(?i)please\s+(?:let me know|clarify|advise|tell me|decide)|let me know\s+(?:which|what|whether|how|if you(?:'d)? prefer|your)|",
        r"\btell me\s+(?:which|whether|what|how)\b|(?:i'd|i would) like your (?:call|decision|input|guidance) on|",
        r"\byour call on\b|\b(?:need|waiting (?:on|for)) (?:a|your) decision|",
        r"ご指示を?お願い|ご判断(?:を)?(?:ください|お願い)|ご判断いただけ|",
        r"could you\s+(?:please\s+)?(?:specify|clarify|tell me|provide)|",
        r"教えてください|教えていただけ|お知らせください|ご指示ください|ご教示ください|指定してください"
    ))
});
static OPTIONS: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?im)^\s*(?:[1-9][.)]|[A-D][.)]|[-*]\s*(?:option|案)\s*[1-9A-D])\s+\S|オプション\s*[1-9A-Z]|選択肢|(?:A|B)案",
    )
});
/// A request to choose, beside a list of options. "どちらも" ("both"),
/// "どちらでも" ("either works") and "which one of the inputs crashed" are
/// not: "どちらの" counts in a sentence that asks ("…か。", "…か決めて",
/// "…ください"), "どちらか" in a request, and "which …" in a question or
/// before the options (a line ending in a colon).
static SELECTION: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"(?im)選んでください|お選びください|選択してください|どちら(?:が|を|に|で)(?:[^も]|$)|",
        r"どちらの[^。\n]*?(?:か(?:[、。？?\s]|$)|か(?:決め|選|ご指示|ご判断|教え)|ください|お願い)|",
        r"どちらか[^。\n]*?(?:ください|お願い)|どれ(?:に|を|が)|please\s+(?:select|choose|pick)|",
        r"which\b[^.\n?]*\b(?:prefer|option|approach|one|method)\b[^.\n?]*(?:\?|:[ \t]*$)|",
        r"(?:need to know|want to know) which\b"
    ))
});

/// A question put to the reader ("Should I …", "do you …", …ますか): never
/// a section's heading, however bold.
static ADDRESSES_READER: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"(?i)\b(?:you|your|should i|shall i|shall we|should we|can i|may i|do we)\b|",
        r"ますか|ませんか|でしょうか|ください"
    ))
});

/// The output with everything that is not the agent's own prose removed.
fn strip_non_prose(output: &str) -> String {
    let mut kept = Vec::new();
    let mut fence: Option<&str> = None;
    for line in output.lines() {
        let t = line.trim_start();
        if let Some(f) = fence {
            if t.starts_with(f) {
                fence = None;
            }
            continue;
        }
        if t.starts_with("```") || t.starts_with("~~~") {
            fence = Some(&t[..3]);
            continue;
        }
        if t.starts_with('>') {
            continue;
        }
        kept.push(line);
    }
    let text = kept.join("\n");
    let text = HTML_COMMENT.replace_all(&text, "");
    let text = INLINE_CODE.replace_all(&text, "");
    let text = URL.replace_all(&text, "");
    let text = QUOTED.replace_all(&text, "");
    let text = OFFER.replace_all(&text, |c: &regex::Captures| match c[0].contains(" or ") {
        true => c[0].to_owned(),
        false => String::new(),
    });
    PLEASANTRY.replace_all(&text, "").into_owned()
}

fn text_signals(text: &str) -> Vec<Signal> {
    let mut out = Vec::new();
    if let Some(line) = direct_question(text) {
        out.push(signal(SignalKind::DirectQuestion, line));
    } else if let Some(m) = JA_QUESTION.find(text) {
        out.push(signal(SignalKind::DirectQuestion, m.as_str()));
    }
    if let Some(m) = CONFIRMATION.find(text) {
        out.push(signal(SignalKind::Confirmation, m.as_str()));
    }
    if let Some(m) = LET_ME_KNOW.find(text) {
        out.push(signal(SignalKind::LetMeKnow, m.as_str()));
    }
    if OPTIONS.is_match(text)
        && let Some(m) = SELECTION.find(text)
    {
        out.push(signal(SignalKind::OptionsSelection, m.as_str()));
    }
    out
}

/// The first line that is a question to the reader: it ends like a question,
/// is not a heading or a reported question, and is not answered by the next line.
/// A line all in bold is a heading when the output sets out its sections
/// so (a bold line that is no question heads a section too), another bold
/// line follows it, and it does not address the reader: "**Why did add
/// subtract?**" over the paragraph that says why, then "**What changed**".
/// A bold question with no heading after it may be the output's last word
/// to the reader, and still asks; so does "**Should I also …?**" anywhere.
fn direct_question(text: &str) -> Option<&str> {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let sections = lines
        .iter()
        .any(|l| all_bold(l) && !LINE_END_QUESTION.is_match(l));
    lines.iter().enumerate().find_map(|(i, line)| {
        if line.is_empty() || line.starts_with('#') || !LINE_END_QUESTION.is_match(line) {
            return None;
        }
        let body = line.trim_start_matches(|c: char| c == '-' || c == '*' || c.is_whitespace());
        if REPORTED_QUESTION.is_match(body) {
            return None;
        }
        let next = lines[i + 1..].iter().find(|l| !l.is_empty());
        let heading = all_bold(line) && !ADDRESSES_READER.is_match(line);
        if sections && heading && lines[i + 1..].iter().any(|l| all_bold(l)) {
            return None;
        }
        let answered =
            next.is_some_and(|n| ANSWER_START.is_match(n.trim_start_matches(['-', '*', ' '])));
        (!answered).then_some(*line)
    })
}

/// Whether the (trimmed) line is bold from end to end: `**…**` or `__…__`.
fn all_bold(line: &str) -> bool {
    ["**", "__"].iter().any(|mark| {
        line.strip_prefix(mark)
            .and_then(|rest| rest.strip_suffix(mark))
            .is_some_and(|inner| !inner.trim().is_empty() && !inner.contains(mark))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_compiles() {
        for r in [
            &INLINE_CODE,
            &URL,
            &HTML_COMMENT,
            &QUOTED,
            &PLEASANTRY,
            &ANSWER_START,
            &REPORTED_QUESTION,
            &LINE_END_QUESTION,
            &JA_QUESTION,
            &CONFIRMATION,
            &LET_ME_KNOW,
            &OPTIONS,
            &SELECTION,
        ] {
            let _ = r.as_str();
        }
    }

    #[test]
    fn failure_and_emptiness_come_first() {
        assert_eq!(
            detect("Should I proceed?", true, &[]).status,
            AnswerStatus::Error
        );
        assert_eq!(detect("  \n", false, &[]).status, AnswerStatus::Incomplete);
        assert_eq!(
            detect("Done.", false, &["Which DB?".into()]).status,
            AnswerStatus::AwaitingResponse
        );
    }

    #[test]
    fn signals_are_reported_with_their_weights() {
        let v = detect(
            "1) A\n2) B\nPlease let me know.\nWhich option do you prefer?",
            false,
            &[],
        );
        let kinds: Vec<_> = v.signals.iter().map(|s| s.kind).collect();
        assert_eq!(
            kinds,
            vec![
                SignalKind::DirectQuestion,
                SignalKind::Confirmation,
                SignalKind::LetMeKnow,
                SignalKind::OptionsSelection
            ]
        );
        assert_eq!(v.score, 1.0);
    }

    #[test]
    fn code_quotes_and_urls_are_not_prose() {
        let s = strip_non_prose(
            "a\n```\nx?\n```\n> Would you like?\nsee https://x.io/?q=1 and `y?` \"Do you want it?\"",
        );
        assert_eq!(s, "a\nsee  and  ");
    }
}
