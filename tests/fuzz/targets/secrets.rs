//! The secret scanner, over text and diffs with credentials planted in
//! noise: every kind the scanner knows, built at run time from random
//! characters (so no literal credential sits in this file), surrounded by
//! prose, code, quotes and odd characters; plus raw bytes.
//!
//! Properties: a planted credential is found whatever surrounds it (given a
//! word boundary), on the line and in the file it was added to; a finding's
//! text never holds the credential.

use closer::engine::diff::parse_added;
use closer::engine::secrets::{SecretKind, scan, scan_text};
use fastrand::Rng;

use crate::driver::Target;
use crate::input;

pub const TARGET: Target = Target {
    name: "secrets",
    one,
};

const NOISE: &[&str] = &[
    " ", "token", "=", ":", "\"", "'", "`", "let ", "const ", "export ", "# ", "// ", "(", ")",
    "password", "api_key", "example", "${", "}", "sk-", "ghp_", "AKIA", "xoxb-", "é", "🦀",
];

fn one(rng: &mut Rng) {
    if rng.u8(..8) == 0 {
        let _ = scan_text(&String::from_utf8_lossy(&input::bytes(rng, 200)));
        return;
    }
    let (secret, kind) = credential(rng);
    let before = format!("{} ", input::text(rng, NOISE, 6));
    let after = format!(" {}", input::text(rng, NOISE, 6));
    let line = format!("{before}{secret}{after}").replace(['\n', '\r'], " ");
    assert!(
        scan_text(&line).contains(&kind),
        "{kind:?} missed in {line:?}"
    );
    let number = rng.u32(1..10_000);
    let diff = format!(
        "diff --git a/app.env b/app.env\n--- a/app.env\n+++ b/app.env\n@@ -0,0 +{number},2 @@\n+{}\n+{line}\n",
        input::text(rng, NOISE, 4).replace('\n', " ")
    );
    let findings = scan(&parse_added(&diff, usize::MAX).expect("no limit"));
    assert!(
        findings
            .iter()
            .any(|f| f.kind == kind && f.path == "app.env" && f.line == number + 1),
        "{kind:?} not found at app.env:{}: {findings:?} in {diff:?}",
        number + 1
    );
    for f in &findings {
        assert!(
            !f.to_string().contains(&secret),
            "a finding holds the credential"
        );
    }
}

/// The scanner's placeholder marks that random letters can spell.
const PLACEHOLDER_WORDS: &[&str] = &[
    "example",
    "placeholder",
    "changeme",
    "xxxx",
    "your",
    "dummy",
    "fake",
    "redacted",
    "sample",
    "test",
];

/// `min` to `min + extra - 1` random letters and digits.
fn alnum(rng: &mut Rng, min: usize, extra: usize) -> String {
    let n = min + rng.usize(..extra.max(1));
    (0..n).map(|_| rng.alphanumeric()).collect()
}

fn upper_digits(rng: &mut Rng, n: usize) -> String {
    (0..n)
        .map(|_| {
            if rng.bool() {
                rng.uppercase()
            } else {
                rng.digit(10)
            }
        })
        .collect()
}

/// A random credential of a kind the scanner knows, and that kind.
fn credential(rng: &mut Rng) -> (String, SecretKind) {
    match rng.u8(..6) {
        0 => {
            let prefix = input::pick(rng, &["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]);
            (
                format!("{prefix}{}", alnum(rng, 36, 20)),
                SecretKind::GithubToken,
            )
        }
        1 => (
            format!("github_pat_{}", alnum(rng, 22, 60)),
            SecretKind::GithubToken,
        ),
        2 => (
            format!("xoxb-{}", alnum(rng, 10, 30)),
            SecretKind::SlackToken,
        ),
        3 => (
            format!("AKIA{}", upper_digits(rng, 16)),
            SecretKind::AwsAccessKey,
        ),
        4 => {
            let header = format!(
                "-----BEGIN {}PRIVATE KEY-----",
                input::pick(rng, &["", "RSA ", "EC ", "OPENSSH "])
            );
            (header, SecretKind::PrivateKey)
        }
        _ => {
            // Letters and digits, random enough that the entropy check passes,
            // and no word that marks a placeholder.
            let key = loop {
                let key = format!("sk-{}{}a", alnum(rng, 40, 1), rng.u32(10..99));
                let lower = key.to_lowercase();
                if !PLACEHOLDER_WORDS.iter().any(|w| lower.contains(w)) {
                    break key;
                }
            };
            (key, SecretKind::ApiKey)
        }
    }
}
