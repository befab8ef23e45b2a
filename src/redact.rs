//! The outgoing filter: every text closer sends where others can read it —
//! a comment, issue or pull request body on GitHub, a request to the LLM —
//! passes through one [`Redactor`] at that channel's one choke point (the
//! GitHub client's write path, the engine's LLM handle), so no caller can
//! forget it.
//!
//! The redactor holds every secret value closer has: the webhook secret,
//! the App's key material, the LLM key, the values closer gives agents
//! (`pass_env` and `env`), and each installation token as it is minted
//! (tokens rotate; one is forgotten once it has expired). A text is cleaned
//! of every held value (exact match) and of everything the `no_secrets`
//! scanner recognises (private keys, GitHub / Slack / AWS / `sk-` tokens,
//! high-entropy assignments); each is replaced by `[redacted]`. A hit is an
//! incident: logged at warn with its channel and kind (never the value) and
//! counted in `closer_secret_redactions_total{channel, kind}`.
//!
//! It must never log, show or return a held value.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::{Arc, LazyLock, RwLock};

use regex::Regex;
use secrecy::{ExposeSecret, SecretString};

use crate::clock::Millis;
use crate::engine::secrets::find_in_text;

/// What a redacted secret is replaced by.
pub const REDACTED: &str = "[redacted]";

/// Values shorter than this are not held: `1`, `true` or a short path in an
/// agent's `env` would otherwise vanish from every comment. No credential
/// closer holds is this short.
pub const MIN_SECRET_LEN: usize = 8;

/// A word cut short by a size cap (`comment::markdown::ELLIPSIS`): the
/// part of a secret before the cut matches neither the held value nor the
/// scanner's pattern, so it is checked on its own.
static CUT_WORD: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[A-Za-z0-9_+/=.-]{4,}…").expect("valid regex"));

/// The start of a credential the scanner knows, enough to redact a cut one.
static CREDENTIAL_PREFIX: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:gh[pousr]_|github_pat_|sk-|xox[abeoprs]-|AKIA|ASIA)").expect("valid regex")
});

/// Where a held secret came from (the incident's `kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SecretSource {
    WebhookSecret,
    AppPrivateKey,
    InstallationToken,
    LlmApiKey,
    /// A value closer passes to an agent (`pass_env` or `env`).
    AgentEnv,
}

impl SecretSource {
    pub fn as_str(self) -> &'static str {
        match self {
            SecretSource::WebhookSecret => "webhook_secret",
            SecretSource::AppPrivateKey => "app_private_key",
            SecretSource::InstallationToken => "installation_token",
            SecretSource::LlmApiKey => "llm_api_key",
            SecretSource::AgentEnv => "agent_env",
        }
    }
}

/// Where a text is going.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// A GitHub write: comment, issue or pull request body, title, label.
    GitHub,
    /// A request to the LLM.
    Llm,
    /// A commit closer makes and pushes (its message).
    Git,
}

impl Channel {
    pub fn as_str(self) -> &'static str {
        match self {
            Channel::GitHub => "github",
            Channel::Llm => "llm",
            Channel::Git => "git",
        }
    }
}

#[derive(Clone, Copy)]
struct Held {
    source: SecretSource,
    /// When the value stops being a secret (an installation token expires).
    expires_at: Option<Millis>,
}

/// The set of secret values and the filter over them; cheap to clone (the
/// set is shared, so a token registered by one clone is redacted by all).
#[derive(Clone, Default)]
pub struct Redactor {
    held: Arc<RwLock<BTreeMap<String, Held>>>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Redactor({} values held)", self.len())
    }
}

impl Redactor {
    pub fn new() -> Redactor {
        Redactor::default()
    }

    /// The filter as `closer serve` starts it: the webhook secret and the
    /// LLM key. The App adds its key and tokens, the engine the agents'
    /// values.
    pub fn with_operator_secrets(
        webhook_secret: Option<&SecretString>,
        llm_api_key: Option<&SecretString>,
    ) -> Redactor {
        let redactor = Redactor::new();
        if let Some(secret) = webhook_secret {
            redactor.register(SecretSource::WebhookSecret, secret);
        }
        if let Some(key) = llm_api_key {
            redactor.register(SecretSource::LlmApiKey, key);
        }
        redactor
    }

    /// How many values are held.
    pub fn len(&self) -> usize {
        self.held.read().map_or(0, |h| h.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Holds `value` (ignored when shorter than [`MIN_SECRET_LEN`]).
    pub fn register(&self, source: SecretSource, value: &SecretString) {
        self.insert(source, value.expose_secret(), None);
    }

    /// Holds a value that stops being secret at `expires_at` (an
    /// installation token), and forgets those that expired before `now`.
    pub fn register_until(
        &self,
        source: SecretSource,
        value: &SecretString,
        expires_at: Millis,
        now: Millis,
    ) {
        if let Ok(mut held) = self.held.write() {
            held.retain(|_, h| h.expires_at.is_none_or(|at| at > now));
        }
        self.insert(source, value.expose_secret(), Some(expires_at));
    }

    /// Holds a PEM key: the whole text and each line of its body, so a part
    /// of the key that leaks alone is caught too.
    pub fn register_key_material(&self, pem: &SecretString) {
        let text = pem.expose_secret();
        self.insert(SecretSource::AppPrivateKey, text.trim(), None);
        for line in text.lines().map(str::trim) {
            if !line.starts_with("-----") {
                self.insert(SecretSource::AppPrivateKey, line, None);
            }
        }
    }

    fn insert(&self, source: SecretSource, value: &str, expires_at: Option<Millis>) {
        if value.len() < MIN_SECRET_LEN {
            return;
        }
        if let Ok(mut held) = self.held.write() {
            held.insert(value.to_owned(), Held { source, expires_at });
        }
    }

    /// `text` without any secret; every hit is an incident (logged and
    /// counted, never shown).
    pub fn redact<'t>(&self, channel: Channel, text: &'t str) -> Cow<'t, str> {
        let (clean, kinds) = self.clean(text);
        for kind in &kinds {
            report(channel, kind);
        }
        match clean {
            Cow::Owned(text) => {
                Cow::Owned(no_keyword_after_redaction(no_mention_after_redaction(text)))
            }
            borrowed => borrowed,
        }
    }

    /// Every string in a JSON document, redacted in place.
    pub fn redact_json(&self, channel: Channel, value: &mut serde_json::Value) {
        match value {
            serde_json::Value::String(s) => {
                if let Cow::Owned(clean) = self.redact(channel, s) {
                    *s = clean;
                }
            }
            serde_json::Value::Array(items) => {
                items.iter_mut().for_each(|v| self.redact_json(channel, v));
            }
            serde_json::Value::Object(map) => {
                map.values_mut().for_each(|v| self.redact_json(channel, v));
            }
            _ => {}
        }
    }

    /// The text cleaned of held values, then of what the scanner finds,
    /// and the kind of each hit.
    fn clean<'t>(&self, text: &'t str) -> (Cow<'t, str>, Vec<&'static str>) {
        let mut kinds = Vec::new();
        let mut out = Cow::Borrowed(text);
        if let Ok(held) = self.held.read() {
            // Longest first, so a value that contains another goes whole.
            let mut values: Vec<(&String, &Held)> = held.iter().collect();
            values.sort_by_key(|(v, _)| std::cmp::Reverse(v.len()));
            for (value, h) in values {
                if out.contains(value.as_str()) {
                    out = Cow::Owned(out.replace(value.as_str(), REDACTED));
                    kinds.push(h.source.as_str());
                }
            }
        }
        let mut found: Vec<(&'static str, Range<usize>)> = find_in_text(&out)
            .into_iter()
            .map(|(kind, range)| (kind.as_str(), range))
            .collect();
        found.extend(self.cut_secrets(&out));
        if found.is_empty() {
            return (out, kinds);
        }
        kinds.extend(found.iter().map(|(k, _)| *k));
        let spans = merged(found.into_iter().map(|(_, r)| r).collect());
        let mut clean = String::with_capacity(out.len());
        let mut at = 0;
        for span in spans {
            clean.push_str(&out[at..span.start]);
            clean.push_str(REDACTED);
            at = span.end;
        }
        clean.push_str(&out[at..]);
        (Cow::Owned(clean), kinds)
    }
}

/// `[redacted]@name` is a mention to GitHub (any character but an ASCII
/// letter, digit or `_` before the `@` makes one), although the text's
/// mentions were neutralised before: `ghp_…@name`, an e-mail address to
/// that escaping, becomes one once the token is redacted. The `@` gets the
/// same zero-width joiner the escaping gives it (`comment::markdown`).
fn no_mention_after_redaction(text: String) -> String {
    let made = format!("{REDACTED}@");
    if !text.contains(&made) {
        return text;
    }
    text.replace(&made, &format!("{made}\u{200D}"))
}

/// `[redacted]fixes #7` closes issue 7 when it reaches a pull request or
/// a commit on the default branch: `]` ends a word, although the text's
/// closing keywords were broken before (`github::closing`), and the value
/// redacted (a model name closer gives the agent, say) was what kept
/// `…5fixes #7` from being one. A keyword right after a redaction is broken
/// the same way; the text's others are as they were (closer's own
/// `Closes #n` among them).
fn no_keyword_after_redaction(text: String) -> String {
    if !text.contains(REDACTED) {
        return text;
    }
    let mut pieces = text.split(REDACTED);
    let mut out = pieces.next().unwrap_or_default().to_owned();
    for piece in pieces {
        out.push_str(REDACTED);
        match crate::github::closing::break_leading_keyword(piece) {
            Some(broken) => out.push_str(&broken),
            None => out.push_str(piece),
        }
    }
    out
}

impl Redactor {
    /// Secrets a size cap cut short: a word just before `…` that begins a
    /// held value (eight characters or more) or a credential's prefix.
    fn cut_secrets(&self, text: &str) -> Vec<(&'static str, Range<usize>)> {
        let Ok(held) = self.held.read() else {
            return Vec::new();
        };
        CUT_WORD
            .find_iter(text)
            .filter_map(|m| {
                let word = m.as_str().trim_end_matches('…');
                let range = m.start()..m.start() + word.len();
                if word.len() >= MIN_SECRET_LEN
                    && let Some((_, h)) = held.iter().find(|(v, _)| v.starts_with(word))
                {
                    return Some((h.source.as_str(), range));
                }
                CREDENTIAL_PREFIX
                    .is_match(word)
                    .then_some(("cut_credential", range))
            })
            .collect()
    }
}

/// Byte ranges sorted and joined where they overlap.
fn merged(mut spans: Vec<Range<usize>>) -> Vec<Range<usize>> {
    spans.sort_by_key(|r| r.start);
    let mut out: Vec<Range<usize>> = Vec::with_capacity(spans.len());
    for span in spans {
        match out.last_mut() {
            Some(last) if span.start <= last.end => last.end = last.end.max(span.end),
            _ => out.push(span),
        }
    }
    out
}

/// One incident: the channel and the kind, never the value.
fn report(channel: Channel, kind: &'static str) {
    tracing::warn!(
        channel = channel.as_str(),
        kind,
        "secret redacted from an outgoing text"
    );
    metrics::counter!(
        "closer_secret_redactions_total",
        "channel" => channel.as_str(),
        "kind" => kind
    )
    .increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(s: &str) -> SecretString {
        SecretString::from(s.to_owned())
    }

    #[test]
    fn a_held_value_is_replaced_wherever_it_is() {
        let r = Redactor::new();
        r.register(SecretSource::WebhookSecret, &secret("hook-s3cret-value"));
        let text = "the secret is hook-s3cret-value, again:hook-s3cret-value.";
        assert_eq!(
            r.redact(Channel::GitHub, text),
            "the secret is [redacted], again:[redacted]."
        );
        // The control: a text without the value passes as it is, borrowed.
        let other = "the secret is hook-s3cret-valu, not quite";
        assert!(matches!(r.redact(Channel::GitHub, other), Cow::Borrowed(t) if t == other));
    }

    /// The agent writes a token-shaped word before `@victim`: an e-mail
    /// address to the mention escaping, which leaves it alone, and a
    /// mention once the token is redacted, unless the redactor breaks it.
    #[test]
    fn a_redacted_token_before_an_at_sign_makes_no_mention() {
        let r = Redactor::new();
        r.register(SecretSource::AgentEnv, &secret("held-value-1234"));
        let token = format!("ghp_{}", "A".repeat(36));
        let text = format!("see {token}@victim and held-value-1234@victim2");
        let escaped = crate::comment::markdown::neutralize_mentions(&text);
        assert_eq!(escaped, text, "the escaping sees two e-mail addresses");
        let clean = r.redact(Channel::GitHub, &escaped);
        assert_eq!(
            clean,
            "see [redacted]@\u{200D}victim and [redacted]@\u{200D}victim2"
        );
        // The control: without the joiner, GitHub would read both mentions.
        assert!(no_mention_after_redaction(String::from("x")) == "x");
        let plain = clean.replace('\u{200D}', "");
        assert!(plain.contains("[redacted]@victim"), "{plain}");
    }

    /// An issue titled `claude-sonnet-4-5fixes #7 …` (the model name is a
    /// value closer gives the agent): its closing keyword is no keyword to
    /// the escaping (a digit before it), and was one to GitHub once the
    /// value was redacted, in the pull request title a squash merge makes a
    /// commit subject. The keyword after the redaction is broken; closer's
    /// own `Closes #3` further on is left as it is.
    #[test]
    fn a_redacted_value_before_a_closing_keyword_makes_no_keyword() {
        use crate::github::closing::neutralize_closing_keywords;
        let r = Redactor::new();
        r.register(SecretSource::AgentEnv, &secret("claude-sonnet-4-5"));
        let title = "fix: claude-sonnet-4-5fixes #7 parser crash";
        let escaped = neutralize_closing_keywords(title);
        assert_eq!(escaped, title, "the escaping sees no keyword");
        let body = format!("{escaped}\n\nCloses #3");
        let clean = r.redact(Channel::GitHub, &body);
        assert_eq!(
            clean,
            "fix: [redacted]fixes\u{2060} #7 parser crash\n\nCloses #3"
        );
        // The control: without the joiner, the keyword is one.
        let plain = clean.replace('\u{2060}', "");
        assert_ne!(neutralize_closing_keywords(&plain), plain, "{plain}");
        assert_eq!(no_keyword_after_redaction("x".into()), "x");
    }

    #[test]
    fn short_values_are_not_held_and_nothing_is_shown_in_debug() {
        let r = Redactor::new();
        r.register(SecretSource::AgentEnv, &secret("1"));
        r.register(SecretSource::AgentEnv, &secret("true"));
        assert!(r.is_empty());
        r.register(SecretSource::LlmApiKey, &secret("key-1234567890"));
        assert_eq!(format!("{r:?}"), "Redactor(1 values held)");
        assert_eq!(r.redact(Channel::Llm, "exit 1: true"), "exit 1: true");
    }

    #[test]
    fn scanner_patterns_are_redacted_without_being_held() {
        let r = Redactor::new();
        let pat = format!("ghp_{}", "A1b2C3d4E5f6G7h8".repeat(3));
        let text = format!("found {pat} in the logs; password = \"pA9s-w0Rd+Q7zL2mX4vB\"");
        assert_eq!(
            r.redact(Channel::GitHub, &text),
            "found [redacted] in the logs; password = \"[redacted]\""
        );
    }

    #[test]
    fn key_material_is_caught_whole_and_by_the_line() {
        let r = Redactor::new();
        let body = "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo";
        let pem = format!(
            "-----BEGIN {0}-----\n{body}\nZZZZ4GCSqGSIb3DQEBAQUAA4\n-----END {0}-----\n",
            "SOME KEY"
        );
        r.register_key_material(&secret(&pem));
        let leaked = format!("line two of the key: {body}!");
        assert_eq!(
            r.redact(Channel::Llm, &leaked),
            "line two of the key: [redacted]!"
        );
        assert_eq!(r.redact(Channel::Llm, &pem), "[redacted]\n");
    }

    #[test]
    fn an_expired_token_is_forgotten_when_the_next_is_minted() {
        let r = Redactor::new();
        r.register_until(
            SecretSource::InstallationToken,
            &secret("ghs_first_token"),
            100,
            0,
        );
        r.register_until(
            SecretSource::InstallationToken,
            &secret("ghs_second_token"),
            200,
            50,
        );
        assert_eq!(r.len(), 2);
        r.register_until(
            SecretSource::InstallationToken,
            &secret("ghs_third_token"),
            300,
            150,
        );
        assert_eq!(r.len(), 2, "the first expired at 100");
        assert_eq!(
            r.redact(Channel::GitHub, "ghs_second_token ghs_third_token"),
            "[redacted] [redacted]"
        );
    }

    #[test]
    fn json_strings_are_redacted_and_nothing_else_changes() {
        let r = Redactor::new();
        r.register(SecretSource::AgentEnv, &secret("agent-env-value-42"));
        let mut body = serde_json::json!({
            "body": "see agent-env-value-42",
            "labels": ["x", "agent-env-value-42"],
            "n": 3,
        });
        r.redact_json(Channel::GitHub, &mut body);
        assert_eq!(
            body,
            serde_json::json!({"body": "see [redacted]", "labels": ["x", "[redacted]"], "n": 3})
        );
    }

    #[test]
    fn a_secret_cut_short_by_a_size_cap_is_redacted_up_to_the_cut() {
        let r = Redactor::new();
        r.register(
            SecretSource::InstallationToken,
            &secret("ghs_4242_000001xabcdef"),
        );
        let pat = format!("ghp_{}", "Q7wE9rT2yU4iO6pA8sD0".repeat(2));
        let text = format!("a {}… and b ghs_4242_00… end", &pat[..24]);
        assert_eq!(
            r.redact(Channel::GitHub, &text),
            "a [redacted]… and b [redacted]… end"
        );
        // The control: an ordinary word cut short stays.
        assert_eq!(
            r.redact(Channel::GitHub, "the summary was long and cut here…"),
            "the summary was long and cut here…"
        );
    }

    #[test]
    fn overlapping_findings_become_one_redaction() {
        assert_eq!(merged(vec![5..9, 0..3, 2..4, 9..10]), vec![0..4, 5..10]);
    }
}
