//! The built-in `no_secrets` scanner: private keys, GitHub / Slack / AWS /
//! OpenAI-style (and Anthropic) tokens, and high-entropy values assigned to
//! names that say secret, over the lines a run added — and, through
//! [`find_in_text`], for the outgoing filter (`crate::redact`) over every
//! text closer sends out.
//!
//! A finding names the file, the line and the kind, never the value: the
//! evidence goes into comments and logs, where the secret must not.

use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use super::diff::AddedLine;
use super::fingerprint::normalize::re;

/// What kind of credential a line looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SecretKind {
    PrivateKey,
    GithubToken,
    SlackToken,
    SlackWebhook,
    AwsAccessKey,
    AwsSecretKey,
    ApiKey,
    HighEntropyAssignment,
}

impl SecretKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SecretKind::PrivateKey => "private_key",
            SecretKind::GithubToken => "github_token",
            SecretKind::SlackToken => "slack_token",
            SecretKind::SlackWebhook => "slack_webhook",
            SecretKind::AwsAccessKey => "aws_access_key",
            SecretKind::AwsSecretKey => "aws_secret_key",
            SecretKind::ApiKey => "api_key",
            SecretKind::HighEntropyAssignment => "high_entropy_assignment",
        }
    }
}

/// One finding: where, and what kind (never the value).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretFinding {
    pub path: String,
    pub line: u32,
    pub kind: SecretKind,
}

impl std::fmt::Display for SecretFinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{} {}", self.path, self.line, self.kind.as_str())
    }
}

static PATTERNS: LazyLock<Vec<(SecretKind, Regex)>> = LazyLock::new(|| {
    vec![
        (
            SecretKind::PrivateKey,
            re(r"-----BEGIN (?:(?:RSA|DSA|EC|OPENSSH|PGP|ENCRYPTED) )?PRIVATE KEY(?: BLOCK)?-----"),
        ),
        (
            SecretKind::GithubToken,
            re(r"\bgh[pousr]_[A-Za-z0-9]{36,255}\b"),
        ),
        (
            SecretKind::GithubToken,
            re(r"\bgithub_pat_[A-Za-z0-9_]{22,255}\b"),
        ),
        (
            SecretKind::SlackToken,
            re(r"\bxox[abeoprs]-[A-Za-z0-9-]{10,}"),
        ),
        (
            SecretKind::SlackWebhook,
            re(r"https://hooks\.slack\.com/services/T[A-Za-z0-9]+/B[A-Za-z0-9]+/[A-Za-z0-9]{16,}"),
        ),
        (
            SecretKind::AwsAccessKey,
            re(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b"),
        ),
        (
            SecretKind::AwsSecretKey,
            re(r#"(?i)aws.{0,20}(?:secret|private).{0,20}[=:]\s*["']?[A-Za-z0-9/+=]{40}\b"#),
        ),
    ]
});

/// `sk-…` keys (OpenAI, Anthropic `sk-ant-…` and the like); checked for
/// entropy so prose like `sk-learn-compatible-wrapper` is not a key.
static SK_KEY: LazyLock<Regex> = LazyLock::new(|| re(r"\bsk-(?:[a-z]{2,8}-)?[A-Za-z0-9_-]{20,}"));

static ASSIGNMENT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"(?i)([A-Za-z0-9_.-]*(?:secret|token|passw(?:or)?d|pwd|api[_-]?key|access[_-]?key|private[_-]?key|auth|credential)[A-Za-z0-9_.-]*)["']?\s*(?::=|=>|=|:)\s*["'`]?([^\s"'`,;]{16,})"#,
    )
});

const PLACEHOLDER_MARKS: &[&str] = &[
    "${",
    "{{",
    "<",
    "(",
    "process.env",
    "os.environ",
    "getenv",
    "example",
    "placeholder",
    "changeme",
    "xxxx",
    "your",
    "dummy",
    "fake",
    "redacted",
    "***",
    "sample",
    "test",
    "secrets.",
];

/// Shannon entropy in bits per character.
fn entropy(s: &str) -> f64 {
    let mut counts = std::collections::HashMap::new();
    for c in s.chars() {
        *counts.entry(c).or_insert(0usize) += 1;
    }
    let len = s.chars().count() as f64;
    counts
        .values()
        .map(|&n| {
            let p = n as f64 / len;
            -p * p.log2()
        })
        .sum()
}

fn looks_random(value: &str, min_entropy: f64) -> bool {
    let lower = value.to_lowercase();
    if PLACEHOLDER_MARKS.iter().any(|m| lower.contains(m)) {
        return false;
    }
    let has_digit = value.chars().any(|c| c.is_ascii_digit());
    let has_alpha = value.chars().any(|c| c.is_ascii_alphabetic());
    has_digit && has_alpha && entropy(value) >= min_entropy
}

/// The kinds of credential on one line of text.
pub fn scan_text(text: &str) -> Vec<SecretKind> {
    let mut kinds: Vec<SecretKind> = PATTERNS
        .iter()
        .filter(|(_, re)| re.is_match(text))
        .map(|(kind, _)| *kind)
        .collect();
    if SK_KEY
        .find_iter(text)
        .any(|m| looks_random(m.as_str(), 3.5))
    {
        kinds.push(SecretKind::ApiKey);
    }
    if kinds.is_empty()
        && ASSIGNMENT
            .captures_iter(text)
            .any(|c| looks_random(&c[2], 3.5))
    {
        kinds.push(SecretKind::HighEntropyAssignment);
    }
    kinds.dedup();
    kinds
}

/// A private key block, for redaction: the header alone is what
/// [`scan_text`] needs, but the body is the secret. The block is the
/// header, then lines of what a key's body can hold — base64, or an armor
/// header such as PEM's `Proc-Type: 4,ENCRYPTED` or PGP's `Comment: …` —
/// each line break real or escaped (`\n` in JSON) and followed by any
/// indentation or `>` quote marks (a key closer quotes), then the footer if
/// it comes next. Line breaks are taken only before a line or the footer:
/// the breaks after the last of them stay, so a fence or a marker on the
/// next line stays on a line of its own. It never runs on to the end of
/// the text or to a footer further down: a header the agent writes in its
/// summary must not take closer's own text after it with it (the
/// verification table, the once-marker), nor join a footer printed by a
/// test into one span over closer's markdown.
static PRIVATE_KEY_BLOCK: LazyLock<Regex> = LazyLock::new(|| {
    const KIND: &str = r"(?:(?:RSA|DSA|EC|OPENSSH|PGP|ENCRYPTED) )?PRIVATE KEY(?: BLOCK)?";
    const BREAK: &str = r"(?:[ \t]*(?:\r?\n|\\r\\n|\\n)[ \t>]*|[ \t]+)";
    const LINE: &str = r"(?:[A-Za-z][A-Za-z0-9-]*: [^\r\n\\]*|[A-Za-z0-9+/=]+)";
    re(&format!(
        "-----BEGIN {KIND}-----(?:{BREAK}+{LINE})*(?:{BREAK}+-----END {KIND}-----)?"
    ))
});

/// Where in `text` each credential the scanner knows is, by byte range:
/// the same patterns as [`scan_text`], a private key as its whole block and
/// a high-entropy assignment as its value only (the name stays readable).
pub fn find_in_text(text: &str) -> Vec<(SecretKind, std::ops::Range<usize>)> {
    let mut found: Vec<(SecretKind, std::ops::Range<usize>)> = PRIVATE_KEY_BLOCK
        .find_iter(text)
        .map(|m| (SecretKind::PrivateKey, m.range()))
        .collect();
    for (kind, re) in PATTERNS
        .iter()
        .filter(|(k, _)| *k != SecretKind::PrivateKey)
    {
        found.extend(re.find_iter(text).map(|m| (*kind, m.range())));
    }
    found.extend(
        SK_KEY
            .find_iter(text)
            .filter(|m| looks_random(m.as_str(), 3.5))
            .map(|m| (SecretKind::ApiKey, m.range())),
    );
    found.extend(
        ASSIGNMENT
            .captures_iter(text)
            .filter_map(|c| c.get(2))
            .filter(|m| looks_random(m.as_str(), 3.5))
            .map(|m| (SecretKind::HighEntropyAssignment, m.range())),
    );
    found
}

/// Every finding in the added lines.
pub fn scan(lines: &[AddedLine]) -> Vec<SecretFinding> {
    lines
        .iter()
        .flat_map(|l| {
            scan_text(&l.text).into_iter().map(|kind| SecretFinding {
                path: l.path.clone(),
                line: l.line,
                kind,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Built at run time so this file holds no literal credential.
    fn corpus_true() -> Vec<(String, SecretKind)> {
        let b = "A1b2C3d4E5f6G7h8";
        vec![
            (
                format!("-----BEGIN {}PRIVATE KEY-----", "RSA "),
                SecretKind::PrivateKey,
            ),
            (
                format!("-----BEGIN {}PRIVATE KEY-----", "OPENSSH "),
                SecretKind::PrivateKey,
            ),
            (
                format!("-----BEGIN {}PRIVATE KEY-----", ""),
                SecretKind::PrivateKey,
            ),
            (
                format!("token = \"ghp_{b}{b}Zz9y\""),
                SecretKind::GithubToken,
            ),
            (format!("GH=ghs_{b}{b}Qq1w"), SecretKind::GithubToken),
            (format!("github_pat_11{b}_{b}"), SecretKind::GithubToken),
            (
                format!("SLACK = 'xoxb-1234567890-{b}'"),
                SecretKind::SlackToken,
            ),
            (
                format!("url: https://hooks.slack.com/services/T0123ABC/B0456DEF/{b}xy"),
                SecretKind::SlackWebhook,
            ),
            (
                format!("aws_access_key_id = {}IOSFODNN7EXAMPL3", "AKIA"),
                SecretKind::AwsAccessKey,
            ),
            (
                format!(
                    "aws_secret_access_key = {}/K7MDENG/bPxRfiCYEXAMPLEKEY",
                    "wJalrXUtnFEMI"
                ),
                SecretKind::AwsSecretKey,
            ),
            (format!("OPENAI_API_KEY=sk-proj-{b}{b}"), SecretKind::ApiKey),
            (format!("key: \"sk-ant-api03-{b}{b}\""), SecretKind::ApiKey),
            (
                format!("db_password = \"{}\"", "pA9s-w0Rd+Q7zL2mX4vB"),
                SecretKind::HighEntropyAssignment,
            ),
            (
                format!("\"client_secret\": \"{}\",", "8f3Kq1ZxV0bN7mT2rY6wP4sD"),
                SecretKind::HighEntropyAssignment,
            ),
        ]
    }

    fn corpus_false() -> Vec<&'static str> {
        vec![
            "let token = std::env::var(\"GITHUB_TOKEN\")?;",
            "password = os.environ[\"DB_PASSWORD\"]",
            "api_key: ${{ secrets.OPENAI_API_KEY }}",
            "API_KEY=your-api-key-here",
            "secret = \"changeme-changeme-changeme\"",
            "auth_header_name = \"authorization_bearer_header\"",
            "token_count = compute_token_count(tokens)",
            "pip install sk-learn-compatible-estimators-wrapper",
            "sha = \"4b825dc642cb6eb9a060e54bf8d69288fbee4904\"",
            "// the -----BEGIN PUBLIC KEY----- block is fine",
            "password: <PASSWORD>",
            "AKIA is the prefix of an AWS access key id",
            "token = get_installation_token(installation_id)",
            "ghp_ is the prefix of personal access tokens",
            "secret_key = \"test-secret-key-1234567890\"",
        ]
    }

    #[test]
    fn finds_every_true_positive() {
        for (line, kind) in corpus_true() {
            let found = scan_text(&line);
            assert!(
                found.contains(&kind),
                "{line:?} → {found:?}, expected {kind:?}"
            );
        }
    }

    #[test]
    fn ignores_every_false_positive() {
        for line in corpus_false() {
            assert_eq!(scan_text(line), Vec::<SecretKind>::new(), "{line:?}");
        }
    }

    #[test]
    fn every_true_positive_is_found_where_it_is_and_no_false_one() {
        for (line, kind) in corpus_true() {
            let spans = find_in_text(&line);
            assert!(
                spans.iter().any(|(k, r)| *k == kind && !r.is_empty()),
                "{line:?} → {spans:?}, expected {kind:?}"
            );
        }
        for line in corpus_false() {
            assert_eq!(find_in_text(line), vec![], "{line:?}");
        }
        let block = format!(
            "key:\n-----BEGIN {}PRIVATE KEY-----\nMIIEow\n-----END {}PRIVATE KEY-----\ntail",
            "RSA ", "RSA "
        );
        let spans = find_in_text(&block);
        assert_eq!(&block[spans[0].1.clone()].lines().count(), &3);
        assert!(block[spans[0].1.end..].starts_with("\ntail"));
    }

    /// A header the agent writes (its summary, a commit subject) and a
    /// footer a test it wrote prints, with closer's own markdown between:
    /// only the header and what could be a key's body go, and the table,
    /// the fence and the marker stay. Before, the span ran from the header
    /// to the footer (or to the end of the text) and cut closer's text out.
    #[test]
    fn a_key_block_never_runs_over_closers_own_markdown() {
        let header = format!("-----BEGIN {}PRIVATE KEY-----", "");
        let footer = format!("-----END {}PRIVATE KEY-----", "");
        let body = format!(
            "- {header} fix\n\n### Verification\n\n| goal | result |\n|---|---|\n| tests | ❌ |\n\n\
             ```text\n{footer}\n### Verification\n```\n<!-- closer:once=run-1:pull -->"
        );
        let spans = find_in_text(&body);
        let kept: String = {
            let mut at = 0;
            let mut out = String::new();
            for (_, r) in &spans {
                out.push_str(&body[at..r.start]);
                at = r.end;
            }
            out + &body[at..]
        };
        assert!(kept.contains("| tests | ❌ |"), "{kept}");
        assert!(kept.contains("```text"), "{kept}");
        assert!(kept.ends_with("<!-- closer:once=run-1:pull -->"), "{kept}");
        assert!(!kept.contains(&header), "{kept}");
        // The line breaks after a header alone stay: a fence closing after
        // it still closes, and a marker stays on its own last line.
        for after in [
            "\n```\ntail",
            "\n\n<!-- closer:once=r1:thread-10-upto-99 -->",
        ] {
            let text = format!("```\n> said {header}{after}");
            let spans = find_in_text(&text);
            assert_eq!(&text[spans[0].1.clone()], header, "{text:?}");
        }
        // A key with its encryption headers still goes whole.
        let encrypted = format!(
            "{}\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,3F2E\n\nMIIEow+/=\n{}",
            header.replace("BEGIN ", "BEGIN RSA "),
            footer.replace("END ", "END RSA ")
        );
        let text = format!("x\n{encrypted}\ny");
        let spans = find_in_text(&text);
        assert_eq!(&text[spans[0].1.clone()], encrypted);
        // Quoted (as closer quotes the agent's words), escaped in JSON, and
        // PGP's armor with a comment line: whole too.
        let pgp_header = header.replace("PRIVATE KEY", "PGP PRIVATE KEY BLOCK");
        let pgp_footer = footer.replace("PRIVATE KEY", "PGP PRIVATE KEY BLOCK");
        for key in [
            format!("{header}\n> MIIEow+/=\n> abc\n> {footer}"),
            format!("{header}\\nMIIEow\\nabc=\\n{footer}"),
            format!(
                "{pgp_header}\nVersion: GnuPG v2\nComment: GPGTools - https://gpgtools.org\n\n\
                 lQOYBF+abc\n=abcd\n{pgp_footer}"
            ),
        ] {
            let text = format!("> x\n> {key}\n> y");
            let spans = find_in_text(&text);
            assert_eq!(&text[spans[0].1.clone()], key, "{text}");
        }
    }

    #[test]
    fn findings_name_place_and_kind_but_not_the_value() {
        let value = format!("ghp_{}", "A1b2C3d4E5f6G7h8".repeat(3));
        let lines = vec![AddedLine {
            path: "src/a.rs".into(),
            line: 7,
            text: format!("const T: &str = \"{value}\";"),
        }];
        let found = scan(&lines);
        assert_eq!(found.len(), 1);
        let shown = found[0].to_string();
        assert_eq!(shown, "src/a.rs:7 github_token");
        assert!(!shown.contains(&value));
    }
}
