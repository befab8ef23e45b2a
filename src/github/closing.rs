//! GitHub's closing keywords: `Fixes #5` in a pull request's description, or
//! in a commit message that reaches the default branch, closes issue 5 when
//! the pull request is merged (and a squash merge makes the pull request's
//! title a commit subject). closer writes one on purpose, `Closes #n` for
//! its own issue; any other comes from text an attacker can shape (an
//! issue's title, the agent's summary), and merging closer's pull request
//! must not close an unrelated issue (a security report, say).

use std::sync::LazyLock;

use regex::Regex;

/// Joins the keyword to what follows without a visible change, so GitHub no
/// longer reads a keyword followed by a reference.
const WORD_JOINER: char = '\u{2060}';

/// A closing keyword (any case, not preceded by an ASCII letter or digit)
/// followed, across markdown and separators, by what starts an issue
/// reference: `#5`, `GH-5`, `owner/repo#5`, or a URL. Between the two may
/// stand emphasis, brackets, code ticks, quote markers, spaces, a colon,
/// line breaks and HTML entities (GitHub may read the rendered text), and
/// at least one space, colon or entity: `fixed-point/lib#12` and
/// `fixtures/app#3` are names, not keywords, and are left alone.
static CLOSING: LazyLock<Regex> = LazyLock::new(|| {
    let keyword = r"(close[sd]?|fix(?:e[sd])?|resolve[sd]?)";
    let mark = r"[*_\[(>`~\\]";
    let space = r"(?:\s|:|&[a-z0-9#]+;)";
    // `#` and a digit may be written as character references too.
    let hash = r"(?:#|&#0*35;|&#x0*23;|&num;)";
    let digit = r"(?:\d|&#0*(?:4[89]|5[0-7]);|&#x0*3\d;)";
    let reference = format!(r"(?:{hash}{digit}|gh-{digit}|[\w.-]+/[\w.-]+{hash}{digit}|https?://)");
    Regex::new(&format!(
        r"(?i)(^|[^a-z0-9]){keyword}({mark}*{space}(?:{mark}|{space})*{reference})"
    ))
    .expect("the closing keyword pattern")
});

/// `text` with every closing keyword that precedes an issue reference
/// broken by an invisible word joiner: it reads the same, and merging
/// closes nothing by it.
///
/// Matches do not overlap, so a keyword whose only separator from the one
/// before is that one's reference (`closes https://fixes #7`) is found by
/// another pass; each pass breaks at least one keyword, and a broken one
/// is never found again.
pub fn neutralize_closing_keywords(text: &str) -> String {
    let mut text = text.to_owned();
    loop {
        let next = CLOSING.replace_all(&text, |c: &regex::Captures<'_>| {
            format!("{}{}{WORD_JOINER}{}", &c[1], &c[2], &c[3])
        });
        match next {
            std::borrow::Cow::Borrowed(_) => return text,
            std::borrow::Cow::Owned(next) => text = next,
        }
    }
}

/// `tail` with the closing keyword it starts with broken, when it starts
/// with one before an issue reference; `None` otherwise. For text that
/// something put right before `tail` made a keyword of (the outgoing
/// filter's `[redacted]`, `redact.rs`), where breaking every keyword
/// would break closer's own `Closes #n` too.
pub fn break_leading_keyword(tail: &str) -> Option<String> {
    let c = CLOSING.captures(tail)?;
    let whole = c.get(0)?;
    if whole.start() != 0 || !c[1].is_empty() {
        return None;
    }
    Some(format!(
        "{}{WORD_JOINER}{}{}",
        &c[2],
        &c[3],
        &tail[whole.end()..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn broken(text: &str) -> bool {
        neutralize_closing_keywords(text).contains(WORD_JOINER)
    }

    #[test]
    fn every_keyword_form_before_a_reference_is_broken() {
        for keyword in [
            "close", "closes", "closed", "fix", "fixes", "fixed", "resolve", "resolves",
            "resolved", "Fixes", "CLOSES",
        ] {
            for reference in [
                "#5",
                "\\#5",
                "GH-5",
                "octo/calc#5",
                "https://github.com/octo/calc/issues/5",
            ] {
                for sep in [
                    " ", ": ", ":", "  ", "\n", "\n> ", "** ", " **", " `", " [", "&#32;", "&nbsp;",
                ] {
                    let text = format!("fix: add, {keyword}{sep}{reference} too");
                    assert!(broken(&text), "{text:?}");
                }
            }
        }
        for text in [
            "**Fixes** #5",
            "_fixes_ #5",
            "x_fixes #5",
            "éfixes #5",
            "(closes #5)",
            "fix: #5 crash",
        ] {
            assert!(broken(text), "{text:?}");
        }
    }

    #[test]
    fn the_text_reads_the_same_and_the_rest_is_untouched() {
        let out = neutralize_closing_keywords("Crash in add, fixes #12 (see #3)");
        assert_eq!(
            out.replace(WORD_JOINER, ""),
            "Crash in add, fixes #12 (see #3)"
        );
        assert_eq!(out.matches(WORD_JOINER).count(), 1);
        for plain in [
            "fix: add adds",
            "fixes the bug in #3's code? no: see #3",
            "prefixes #5",
            "closest #5",
            "refix #5",
            "closer/issue-5",
            "fix 5 bugs",
            "closeio/closeio-api#12",
            "fixtures/app#3",
            "fixed-point/lib#12",
            "fixed_point/lib#12",
            "resolver/x#2",
            "fixes#5",
        ] {
            assert!(!broken(plain), "{plain:?}");
            assert_eq!(neutralize_closing_keywords(plain), plain);
        }
    }

    /// A keyword right after another's URL, a long run of spaces, and a
    /// reference written with character references (decision 229).
    #[test]
    fn keywords_the_first_pass_cannot_see_are_broken_too() {
        let text = "closes https://fixes #7";
        let out = neutralize_closing_keywords(text);
        assert_eq!(out.matches(WORD_JOINER).count(), 2, "{out:?}");
        assert_eq!(out.replace(WORD_JOINER, ""), text);
        for text in [
            &format!("fixes{}#7", " ".repeat(40)),
            "fixes &#35;7",
            "fixes #&#55;",
            "fixes &#x23;&#x37;",
            "resolves octo/calc&num;7",
            "closes https://a closes https://b closes https://c closes #4",
        ] {
            let out = neutralize_closing_keywords(text);
            let keywords = text.matches("fixes").count()
                + text.matches("resolves").count()
                + text.matches("closes").count();
            assert_eq!(out.matches(WORD_JOINER).count(), keywords, "{text:?}");
        }
    }

    #[test]
    fn neutralising_twice_changes_nothing_more() {
        let once = neutralize_closing_keywords("fix: #5, closes octo/calc#6\nresolves: GH-7");
        assert_eq!(once.matches(WORD_JOINER).count(), 3);
        assert_eq!(neutralize_closing_keywords(&once), once);
    }
}
