//! Making untrusted text (agent output, issue text, user names, evidence) safe
//! to put inside a comment the bot posts, and cutting text to a size without
//! splitting a character.
//!
//! Everything here is pure string work. It must never let untrusted text ping
//! someone (`@user`), open HTML (a `<details>`, an `<!-- -->` comment that hides
//! the rest, a fake `<!-- closer:run=… -->` marker) or leave a code fence open
//! that swallows the rest of the comment. Text is escaped before it is cut to a
//! size, so the size is what is posted. It does not redact secrets on its own:
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

/// `@` written as a character reference (`&#64;`, `&#x40;`, `&commat;`),
/// which GitHub decodes before it looks for mentions.
static AT_REFERENCE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(r"(?i)&(?:#0*64|#x0*40|commat);").expect("the @ reference pattern")
});

/// Neutralises `@name` and `@org/team` mentions by putting a zero-width joiner
/// after the `@`. An `@` after an ASCII letter or digit (an e-mail address)
/// is left alone: GitHub does not treat it as a mention. After any other
/// character it is neutralised: after `é` (GitHub's rule is ASCII), and
/// after `_`, which may open emphasis (`_@alice_` renders as an emphasised
/// `@alice`, a mention). An `@` written as a character reference is
/// written as `@` first, so it is neutralised as one (decision 229).
pub fn neutralize_mentions(text: &str) -> String {
    let text = AT_REFERENCE.replace_all(text, "@");
    let mut out = String::with_capacity(text.len());
    let mut prev: Option<char> = None;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(c);
        let starts_mention = c == '@'
            && !prev.is_some_and(|p| p.is_ascii_alphanumeric())
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
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fence {
    ch: char,
    len: usize,
}

impl Fence {
    /// Whether `line` closes this fence: the same character, at least as many
    /// times, and nothing but spaces and tabs after it.
    pub(crate) fn is_closed_by(self, line: &str) -> bool {
        matches!(fence_of(line), Some((f, false)) if f.ch == self.ch && f.len >= self.len)
    }
}

/// Reads a fence line (up to three spaces, then three or more backticks or
/// tildes): returns the fence and whether anything follows it. Only spaces
/// and tabs count as nothing: after a no-break space or a form feed the
/// line is a fence with an info string, which opens a block but never
/// closes one (CommonMark).
pub(crate) fn fence_of(line: &str) -> Option<(Fence, bool)> {
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
    let after = rest[len..].trim_matches([' ', '\t']);
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
        match open {
            Some(o) if o.is_closed_by(line) => open = None,
            Some(_) => {}
            None => open = fence_of(line).map(|(fence, _)| fence),
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

/// A commit id as closer shows it: its first 12 hex digits (anything
/// else GitHub or git never put in one is dropped).
pub fn short_sha(sha: &str) -> String {
    sha.chars()
        .filter(char::is_ascii_hexdigit)
        .take(12)
        .collect()
}

/// Untrusted markdown that is rendered as markdown (an agent's answer, a
/// quoted question): no mentions, no HTML, no open fence. Line breaks
/// become `\n`: GitHub's markdown also ends a line at a lone `\r`, which
/// Rust's `lines()` does not, so a fence or a heading after one would
/// escape [`close_fences`] and [`quote`].
pub fn untrusted_markdown(text: &str) -> String {
    close_fences(&neutralize(text))
}

/// [`untrusted_markdown`] cut to `max` bytes (before the fence it may have
/// to close), and whether it was cut. Escaped first, then cut: escaping adds
/// three bytes to each `<x` and `@x`, so text cut first could come out two
/// and a half times as long. A `<` or `@` whose zero-width character the cut
/// drops is followed by [`ELLIPSIS`], which opens no tag and no mention.
pub fn untrusted_markdown_cut(text: &str, max: usize) -> (String, bool) {
    let safe = neutralize(text);
    (close_fences(&cut(&safe, max)), would_cut(&safe, max))
}

/// Line breaks as `\n`, mentions and HTML neutralised: [`untrusted_markdown`]
/// before its fences are closed.
fn neutralize(text: &str) -> String {
    let lines = text.replace("\r\n", "\n").replace('\r', "\n");
    neutralize_html(&neutralize_mentions(&lines))
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
    unpaired_backticks_escaped(&cut(&safe, max.saturating_add(max / 2)))
}

/// `text` with each run of backticks that opens no code span in it (no
/// later run of the same length: often one a cut left) escaped, so it
/// cannot pair with a backtick in what follows the text on its line (a
/// checklist item's evidence) and swallow closer's markup.
fn unpaired_backticks_escaped(text: &str) -> String {
    // (byte offset, length) of each run of backticks.
    let mut runs = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    // The backslashes right before `i`: one a backslash escapes is a
    // backtick already, not a run.
    let mut backslashes = 0;
    while i < bytes.len() {
        if bytes[i] == b'`' && backslashes % 2 == 0 {
            let start = i;
            while i < bytes.len() && bytes[i] == b'`' {
                i += 1;
            }
            runs.push((start, i - start));
            backslashes = 0;
        } else {
            backslashes = if bytes[i] == b'\\' {
                backslashes + 1
            } else {
                0
            };
            i += 1;
        }
    }
    let mut unpaired = Vec::new();
    let mut k = 0;
    while k < runs.len() {
        let len = runs[k].1;
        match runs[k + 1..].iter().position(|r| r.1 == len) {
            // A code span: its closing run, and all between, are inside it.
            Some(offset) => k += offset + 2,
            None => {
                unpaired.push(runs[k]);
                k += 1;
            }
        }
    }
    if unpaired.is_empty() {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut last = 0;
    for (start, len) in unpaired {
        out.push_str(&text[last..start]);
        out.push_str(&"\\`".repeat(len));
        last = start + len;
    }
    out.push_str(&text[last..]);
    out
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
/// so a copied line cannot ping anyone. Then cut to `max` bytes, so the block
/// holds at most `max` bytes however much the escaping added (a `<` or `@`
/// whose zero-width character is cut off is followed by [`ELLIPSIS`]).
pub fn code_block(text: &str, max: usize) -> String {
    let body = cut(&neutralize_html(&neutralize_mentions(text.trim_end())), max);
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

    /// `_@alice_` is emphasis around a mention; `&#64;alice` is `@alice`
    /// once GitHub decodes it. Both are neutralised; an address is not.
    #[test]
    fn mentions_in_emphasis_or_written_as_references_are_neutralised() {
        for (text, neutral) in [
            ("_@alice_", "_@\u{200D}alice_"),
            ("__@org/team__", "__@\u{200D}org/team__"),
            ("&#64;alice", "@\u{200D}alice"),
            ("&#064;alice", "@\u{200D}alice"),
            ("&#X40;alice", "@\u{200D}alice"),
            ("&commat;org/team", "@\u{200D}org/team"),
            ("mail first.last@example.com", "mail first.last@example.com"),
        ] {
            assert_eq!(neutralize_mentions(text), neutral, "{text}");
        }
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
    fn a_backtick_that_opens_no_code_span_is_escaped() {
        assert_eq!(inline("run `cargo test` now", 100), "run `cargo test` now");
        assert_eq!(inline("cut `cargo te", 100), "cut \\`cargo te");
        assert_eq!(inline("``a ` b`` and `", 100), "``a ` b`` and \\`");
        assert_eq!(inline("`a`` b", 100), "\\`a\\`\\` b");
        // A backtick escaped already stays as it is.
        assert_eq!(inline("look \\` here", 100), "look \\` here");
        assert_eq!(inline("\\`a` b`", 100), "\\`a` b`");
        // What follows the text stays outside any code span.
        let line = format!("{} <sub>Evidence: `x`</sub>", inline("see `foo", 100));
        assert!(line.starts_with("see \\`foo <sub>"), "{line}");
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

    /// CommonMark: a closing fence may be followed only by spaces and tabs.
    /// Before, `trim()` also took a no-break space or a form feed, so such a
    /// line "closed" the block and the text after it escaped the fence.
    #[test]
    fn a_closing_fence_allows_only_spaces_and_tabs_after_it() {
        for after in ["\u{a0}", "\u{c}", "\u{2003}"] {
            let text = format!("```\ncode\n```{after}\nstill code");
            assert_eq!(close_fences(&text), format!("{text}\n```"), "{after:?}");
        }
        // The control: spaces and tabs after it, and it closes.
        assert_eq!(
            close_fences("```\ncode\n``` \t\ntext"),
            "```\ncode\n``` \t\ntext"
        );
        assert!(fence_of("```\u{a0}").is_some_and(|(_, has_info)| has_info));
    }

    /// Escaping adds three bytes to each `<x`: cut first, 20,000 bytes of
    /// `<T>` came out at 40,000.
    #[test]
    fn a_code_block_is_escaped_before_it_is_cut() {
        let out = code_block(&"<T>".repeat(20_000), 20_000);
        let body = out
            .strip_prefix("```text\n")
            .and_then(|b| b.strip_suffix("\n```"))
            .unwrap_or_else(|| panic!("not a code block: {out:.40}"));
        assert!(body.len() <= 20_000, "{}", body.len());
        assert!(body.ends_with(ELLIPSIS));
        assert!(!body.contains("<T"));
    }

    /// A cut at any byte of escaped text leaves nothing to escape again: a
    /// `<` or `@` whose zero-width character was cut off is followed by
    /// the ellipsis, so no tag, comment or mention appears.
    #[test]
    fn a_cut_anywhere_in_escaped_text_opens_nothing() {
        let text = "a<b @c <!-- x --> </d> @e<f";
        let escaped = neutralize_html(&neutralize_mentions(text));
        for max in 0..escaped.len() + 2 {
            let (out, was_cut) = untrusted_markdown_cut(text, max);
            assert_eq!(was_cut, max < escaped.len(), "max {max}");
            assert!(out.len() <= max.max(ELLIPSIS.len()), "max {max}: {out:?}");
            assert_eq!(
                neutralize_html(&neutralize_mentions(&out)),
                out,
                "max {max}"
            );
            let block = code_block(text, max);
            assert_eq!(neutralize_html(&neutralize_mentions(&block)), block);
        }
        assert_eq!(untrusted_markdown_cut(text, 1_000), (escaped, false));
    }

    #[test]
    fn a_cut_closes_the_fence_it_leaves_open() {
        let (out, was_cut) = untrusted_markdown_cut("```\ncode\n```\nafter", 12);
        assert!(was_cut);
        assert_eq!(out, "```\ncode\n…\n```");
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
