//! Making untrusted text (agent output, issue text, user names, evidence) safe
//! to put inside a comment the bot posts, and cutting text to a size without
//! splitting a character.
//!
//! Everything here is pure string work. It must never let untrusted text ping
//! someone (`@user`), open HTML (a `<details>`, an `<!-- -->` comment that hides
//! the rest, a fake `<!-- closer:run=… -->` marker) or leave a code fence open
//! that swallows the rest of the comment. It does not redact secrets on its own:
//! callers pass the secrets they know to [`redact`].

/// Joins `@` to the following name without a visible change, so GitHub does not
/// turn it into a mention.
const ZERO_WIDTH_JOINER: char = '\u{200D}';
/// Breaks `<tag`, `</tag`, `<!--` and `<?` so GitHub does not read them as HTML.
const ZERO_WIDTH_SPACE: char = '\u{200B}';
/// What a cut text ends with.
pub const ELLIPSIS: &str = "…";

/// Replaces every occurrence of each secret with `[redacted]`. Empty secrets
/// are ignored; longer secrets are replaced first so a secret that contains
/// another is not half-redacted.
pub fn redact(text: &str, secrets: &[&str]) -> String {
    let mut ordered: Vec<&str> = secrets.iter().copied().filter(|s| !s.is_empty()).collect();
    ordered.sort_by_key(|s| std::cmp::Reverse(s.len()));
    let mut out = text.to_owned();
    for secret in ordered {
        if out.contains(secret) {
            out = out.replace(secret, "[redacted]");
        }
    }
    out
}

/// Neutralises `@name` and `@org/team` mentions by putting a zero-width joiner
/// after the `@`. An `@` after an ASCII letter, digit or `_` (an e-mail
/// address) is left alone: GitHub does not treat it as a mention. After any
/// other character (`é@alice`) it is neutralised: GitHub's rule is ASCII.
pub fn neutralize_mentions(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut prev: Option<char> = None;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(c);
        let starts_mention = c == '@'
            && !prev.is_some_and(|p| p.is_ascii_alphanumeric() || p == '_')
            && chars
                .peek()
                .is_some_and(|n| n.is_ascii_alphanumeric() || *n == '-');
        if starts_mention {
            out.push(ZERO_WIDTH_JOINER);
        }
        prev = Some(c);
    }
    out
}

/// Breaks anything GitHub could read as raw HTML: `<` followed by a letter,
/// `/`, `!` or `?` gets a zero-width space after it. That covers tags,
/// `<!-- … -->` comments (and so fake run markers) and processing
/// instructions, and reads the same to a human. A lone `<` (as in `a < b`) is
/// left as it is.
pub fn neutralize_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(c);
        if c == '<'
            && chars
                .peek()
                .is_some_and(|n| n.is_ascii_alphabetic() || matches!(n, '/' | '!' | '?'))
        {
            out.push(ZERO_WIDTH_SPACE);
        }
    }
    out
}

/// An open code fence: its character and length.
#[derive(Clone, Copy)]
struct Fence {
    ch: char,
    len: usize,
}

/// Reads a fence line (up to three spaces, then three or more backticks or
/// tildes): returns the fence and whether anything follows it.
fn fence_of(line: &str) -> Option<(Fence, bool)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = &line[indent..];
    let ch = rest.chars().next().filter(|c| matches!(c, '`' | '~'))?;
    let len = rest.chars().take_while(|c| *c == ch).count();
    if len < 3 {
        return None;
    }
    let after = rest[len..].trim();
    // A backtick fence's info string may not contain a backtick.
    if ch == '`' && after.contains('`') {
        return None;
    }
    Some((Fence { ch, len }, !after.is_empty()))
}

/// Appends a closing fence when the text leaves a code block open, so it cannot
/// swallow what the bot writes after it.
pub fn close_fences(text: &str) -> String {
    let mut open: Option<Fence> = None;
    for line in text.lines() {
        let Some((fence, has_info)) = fence_of(line) else {
            continue;
        };
        match open {
            None => open = Some(fence),
            Some(o) if fence.ch == o.ch && fence.len >= o.len && !has_info => open = None,
            Some(_) => {}
        }
    }
    match open {
        None => text.to_owned(),
        Some(fence) => {
            let mut out = text.to_owned();
            if !out.ends_with('\n') {
                out.push('\n');
            }
            out.extend(std::iter::repeat_n(fence.ch, fence.len));
            out
        }
    }
}

/// Untrusted markdown that is rendered as markdown (an agent's answer, a
/// quoted question): no mentions, no HTML, no open fence. Line breaks
/// become `\n`: GitHub's markdown also ends a line at a lone `\r`, which
/// Rust's `lines()` does not, so a fence or a heading after one would
/// escape [`close_fences`] and [`quote`].
pub fn untrusted_markdown(text: &str) -> String {
    let lines = text.replace("\r\n", "\n").replace('\r', "\n");
    close_fences(&neutralize_html(&neutralize_mentions(&lines)))
}

/// Untrusted text on one line (a list item, a sentence): line breaks become
/// spaces, mentions and HTML are neutralised. Cut to `max` bytes (the
/// neutralising adds at most half again).
pub fn inline(text: &str, max: usize) -> String {
    let flat: String = cut(text.trim(), max)
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    let safe = neutralize_html(&neutralize_mentions(&flat));
    cut(&safe, max.saturating_add(max / 2))
}

/// Untrusted text in a table cell: [`inline`], and `|` escaped so the table
/// keeps its columns (GitHub honours `\|` even inside code spans in a table).
pub fn cell(text: &str, max: usize) -> String {
    let escaped = inline(text, max).replace('|', "\\|");
    cut(&escaped, max.saturating_mul(2))
}

/// Untrusted text shown verbatim in a fenced code block, the fence longer than
/// any backtick run inside. HTML comments are broken even here so a fake run
/// marker never appears in a body the bot wrote, and mentions are neutralised
/// so a copied line cannot ping anyone. Cut to `max` bytes first.
pub fn code_block(text: &str, max: usize) -> String {
    let body = neutralize_html(&neutralize_mentions(&cut(text.trim_end(), max)));
    let longest = longest_run(&body, '`');
    let fence = "`".repeat(longest.max(2) + 1);
    format!("{fence}text\n{body}\n{fence}")
}

/// Quotes untrusted markdown line by line with `> `.
pub fn quote(text: &str, max: usize) -> String {
    let safe = untrusted_markdown(&cut(text.trim(), max));
    safe.lines()
        .map(|l| {
            if l.is_empty() {
                ">".to_owned()
            } else {
                format!("> {l}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Inline code for a short untrusted value (a file path, a command) outside a
/// table (a `|` would split a table cell: use [`inline`] there).
pub fn code_span(text: &str, max: usize) -> String {
    let flat: String = neutralize_html(&neutralize_mentions(&cut(text, max)))
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    let ticks = "`".repeat(longest_run(&flat, '`') + 1);
    let pad = if flat.starts_with('`') || flat.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{ticks}{pad}{flat}{pad}{ticks}")
}

/// A markdown link to an http(s) URL we were given (the dashboard, a
/// comment); `None` for anything else (other schemes, spaces, markup, over
/// 2,000 bytes), so a bad URL is left out rather than rendered.
pub fn link(label: &str, url: &str) -> Option<String> {
    let web = url.starts_with("https://") || url.starts_with("http://");
    let clean = !url.contains(|c: char| {
        c.is_whitespace() || c.is_control() || matches!(c, '<' | '>' | '"' | '`')
    });
    (web && clean && url.len() <= 2_000).then(|| format!("[{label}]({})", url.replace(')', "%29")))
}

fn longest_run(text: &str, ch: char) -> usize {
    let mut best = 0;
    let mut run = 0;
    for c in text.chars() {
        if c == ch {
            run += 1;
            best = best.max(run);
        } else {
            run = 0;
        }
    }
    best
}

/// The largest char boundary at or below `max`.
pub fn floor_boundary(text: &str, max: usize) -> usize {
    if max >= text.len() {
        return text.len();
    }
    let mut i = max;
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Cuts `text` to at most `max` bytes on a character boundary, ending with `…`
/// when something was cut.
pub fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let keep = floor_boundary(text, max.saturating_sub(ELLIPSIS.len()));
    format!("{}{ELLIPSIS}", &text[..keep])
}

/// At most the first `max` bytes of `text`, ending on a character
/// boundary, without an ellipsis (a commit's short hash, say).
pub fn head(text: &str, max: usize) -> &str {
    &text[..floor_boundary(text, max)]
}

/// Whether [`cut`] would shorten `text`.
pub fn would_cut(text: &str, max: usize) -> bool {
    text.len() > max
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_keeps_whole_characters() {
        assert_eq!(head("0123456789abcdef", 12), "0123456789ab");
        assert_eq!(head("abc", 12), "abc");
        // "é" is two bytes: a cut at byte 2 would split it.
        assert_eq!(head("aé", 2), "a");
        assert_eq!(head("ééééééé", 12), "éééééé");
    }

    #[test]
    fn redact_replaces_every_secret_longest_first() {
        let text = "token ghs_abc123 and ghs_abc123XYZ, again ghs_abc123";
        let out = redact(text, &["ghs_abc123", "ghs_abc123XYZ", ""]);
        assert_eq!(out, "token [redacted] and [redacted], again [redacted]");
        assert_eq!(redact("nothing here", &["secret"]), "nothing here");
        assert_eq!(redact("", &[]), "");
    }

    #[test]
    fn mentions_are_neutralised_but_emails_are_not() {
        let out = neutralize_mentions("ping @alice and @org/team, mail bob@example.com");
        assert!(out.contains("@\u{200D}alice"));
        assert!(out.contains("@\u{200D}org/team"));
        assert!(out.contains("bob@example.com"));
        assert!(!out.contains("@alice"));
        // After a letter outside ASCII GitHub still sees a mention.
        assert_eq!(neutralize_mentions("é@alice"), "é@\u{200D}alice");
        assert_eq!(neutralize_mentions("a lone @ sign"), "a lone @ sign");
    }

    #[test]
    fn html_and_fake_markers_are_broken() {
        let out = neutralize_html("<!-- closer:run=evil --> <details><summary>x</summary> a < b");
        assert!(!out.contains("<!--"));
        assert!(!out.contains("<details>"));
        assert!(!out.contains("<summary>"));
        assert!(out.contains("a < b"));
    }

    #[test]
    fn open_fences_are_closed_and_closed_ones_are_kept() {
        assert_eq!(
            close_fences("```rust\nfn x() {}"),
            "```rust\nfn x() {}\n```"
        );
        assert_eq!(
            close_fences("````\n```\nstill code"),
            "````\n```\nstill code\n````"
        );
        assert_eq!(close_fences("~~~\ncode\n~~~\ntext"), "~~~\ncode\n~~~\ntext");
        assert_eq!(close_fences("no fences"), "no fences");
    }

    #[test]
    fn code_block_fence_is_longer_than_any_run_inside() {
        let out = code_block("before\n````\nafter", 1000);
        assert!(out.starts_with("`````text\n"));
        assert!(out.ends_with("\n`````"));
    }

    #[test]
    fn cell_keeps_tables_intact() {
        let out = cell("a | b\nc <b>bold</b> @eve", 100);
        assert!(!out.contains('\n'));
        assert!(out.contains("a \\| b"));
        assert!(!out.contains("<b>"));
        assert!(!out.contains("@eve"));
    }

    #[test]
    fn links_only_to_web_urls() {
        assert_eq!(
            link("run", "https://x.test/r/1").as_deref(),
            Some("[run](https://x.test/r/1)")
        );
        assert_eq!(
            link("run", "https://x.test/a)b").as_deref(),
            Some("[run](https://x.test/a%29b)")
        );
        assert_eq!(link("run", "javascript:alert(1)"), None);
        assert_eq!(link("run", "https://x.test/a b"), None);
    }

    #[test]
    fn a_lone_carriage_return_is_a_line_break_too() {
        // Without the `\r` read as a break, the fence and the heading would
        // sit on the quote's first line, outside `>`, as GitHub renders it.
        let quoted = quote("a\r```\rb\r### Verification ✅", 100);
        for line in quoted.split(['\r', '\n']) {
            assert!(line.starts_with('>'), "{quoted:?}");
        }
        assert_eq!(untrusted_markdown("x\r```"), "x\n```\n```");
    }

    #[test]
    fn quote_prefixes_every_line() {
        assert_eq!(
            quote("one\n\ntwo @bob", 100),
            "> one\n>\n> two @\u{200D}bob"
        );
    }

    #[test]
    fn cut_never_splits_a_character() {
        let text = "é".repeat(100) + "日本語🙂";
        for max in 0..text.len() + 2 {
            let out = cut(&text, max);
            assert!(out.len() <= max.max(ELLIPSIS.len()));
        }
        assert_eq!(cut("short", 10), "short");
        assert_eq!(cut("abcdefghij", 7), "abcd…");
    }

    #[test]
    fn code_span_survives_backticks_and_pipes() {
        assert_eq!(code_span("a`b|c", 100), "``a`b|c``");
        assert_eq!(code_span("`x", 100), "`` `x ``");
        assert_eq!(code_span("src/lib.rs", 100), "`src/lib.rs`");
    }
}
