//! What closer reads from GitHub's answer headers and statuses, through the
//! functions the transport calls: the `Link` header of a paginated answer
//! (`decode::next_page`), a redirect's `Location` (`decode::next_hop`,
//! `Origin`), and the rate-limit headers the retry policy reads
//! (`retry-after`, `x-ratelimit-remaining`, `x-ratelimit-reset`:
//! `retry::decide`, `decode::rate_limit_remaining`). Values are realistic,
//! mutated, edge numbers or raw bytes (not UTF-8, which `HeaderValue`
//! allows).
//!
//! Properties: never a panic; a `Link` header written by RFC 8288 (quoted
//! or bare `rel`, several relations, other parameters, `;` and `,` inside
//! the URL, any case) yields the first `next` link, and any header yields
//! only a URL it holds; a redirect is followed only for 301/302/307/308, to
//! an absolute URL, a path staying on the API's host and another host never
//! given the token; a rate-limit wait is what `retry-after` asks (an hour
//! at most), any wait is bounded and a retry time is never in the past.

use std::time::Duration;

use closer::github::decode::{self, Hop, Origin};
use closer::github::retry::{Outcome, RetryDecision, RetrySettings, decide};
use fastrand::Rng;
use http::{HeaderMap, HeaderValue, Method};

use crate::driver::Target;
use crate::input;

pub const TARGET: Target = Target {
    name: "github_headers",
    one,
};

const VOCABULARY: &[&str] = &[
    "https://api.github.com/repositories/1/labels?per_page=100&page=2",
    "<",
    ">",
    ";",
    ",",
    "rel=",
    "\"next\"",
    "next",
    "last",
    "prev",
    "=",
    " ",
    "\t",
    "\"",
    "http://",
    "https://",
    "//",
    "/",
    "\\",
    "@",
    ":",
    "%2F",
    "?",
    "#",
    "api.github.com",
    "evil.example",
    "127.0.0.1:8080",
];

fn one(rng: &mut Rng) {
    match rng.u8(..4) {
        0 => link_structured(rng),
        1 => link_anything(rng),
        2 => redirect(rng),
        _ => rate_limit(rng),
    }
}

/// A header value from any bytes `HeaderValue` takes, or `None`.
fn raw_value(rng: &mut Rng, vocabulary: &[&str]) -> Option<HeaderValue> {
    let bytes = match rng.u8(..3) {
        0 => input::bytes(rng, 120),
        _ => input::text(rng, vocabulary, 12).into_bytes(),
    };
    HeaderValue::from_bytes(&bytes).ok()
}

/// One link: a URL (sub-delimiters and all) and its relations, written in
/// any of the ways RFC 8288 allows.
fn link(rng: &mut Rng) -> (String, Vec<String>, String) {
    const TAILS: &[&str] = &[
        "page=2",
        "a=1;b=2",
        "q=x,y",
        "per_page=100&page=7",
        "",
        "%3E",
    ];
    const RELS: &[&str] = &["next", "prev", "last", "first", "NEXT", "Next", "nextish"];
    let url = format!(
        "https://api.github.com/repositories/{}/labels?{}",
        rng.u32(..),
        TAILS[rng.usize(..TAILS.len())]
    );
    let rels: Vec<String> = (0..rng.usize(1..=3))
        .map(|_| RELS[rng.usize(..RELS.len())].to_owned())
        .collect();
    let space = |rng: &mut Rng| [" ", "", "  ", "\t"][rng.usize(..4)];
    let name = ["rel", "REL", "Rel"][rng.usize(..3)];
    let value = if rels.len() == 1 && rng.bool() {
        rels[0].clone()
    } else {
        format!("\"{}\"", rels.join(" "))
    };
    let mut text = format!("<{url}>{}", space(rng));
    if rng.bool() {
        text.push_str(&format!(";{}title=\"a, b; c\"", space(rng)));
    }
    text.push_str(&format!(
        ";{}{name}{}={}{value}",
        space(rng),
        space(rng),
        space(rng)
    ));
    if rng.bool() {
        text.push_str("; type=\"application/json\"");
    }
    (url, rels, text)
}

fn link_structured(rng: &mut Rng) {
    let mut headers = HeaderMap::new();
    let mut wanted = None;
    for _ in 0..rng.usize(1..=3) {
        let links: Vec<_> = (0..rng.usize(1..=4)).map(|_| link(rng)).collect();
        for (url, rels, _) in &links {
            if wanted.is_none() && rels.iter().any(|r| r.eq_ignore_ascii_case("next")) {
                wanted = Some(url.clone());
            }
        }
        let joined: Vec<&str> = links.iter().map(|(_, _, text)| text.as_str()).collect();
        let value = joined.join([",", ", ", " ,\t"][rng.usize(..3)]);
        headers.append(http::header::LINK, value.parse().expect("a header value"));
    }
    let got = decode::next_page(&headers);
    assert_eq!(got, wanted, "{headers:?}");
}

fn link_anything(rng: &mut Rng) {
    let mut headers = HeaderMap::new();
    for _ in 0..rng.usize(0..=3) {
        let value = if rng.bool() {
            let (_, _, text) = link(rng);
            HeaderValue::from_str(&input::mutate_chars(rng, &text, VOCABULARY)).ok()
        } else {
            raw_value(rng, VOCABULARY)
        };
        if let Some(value) = value {
            headers.append(http::header::LINK, value);
        }
    }
    if let Some(url) = decode::next_page(&headers) {
        let held = headers
            .get_all(http::header::LINK)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| v.contains(&url));
        assert!(held, "{url:?} is in no Link header: {headers:?}");
    }
}

const API_URLS: &[&str] = &[
    "https://api.github.com",
    "https://ghe.example.com/api/v3",
    "http://127.0.0.1:8080",
];

fn redirect(rng: &mut Rng) {
    const LOCATIONS: &[&str] = &[
        "https://api.github.com/repositories/42/issues/1",
        "/repositories/42/issues/1",
        "/api/v3/repositories/7",
        "//evil.example/x",
        "https://evil.example/repositories/1",
        "http://127.0.0.1:8080/repositories/1",
        "https://api.github.com@evil.example/x",
        "repositories/42",
        " /repositories/1 ",
    ];
    let origin = Origin::of(API_URLS[rng.usize(..API_URLS.len())]).expect("an API URL");
    let status = match rng.u8(..4) {
        0 => rng.u16(..),
        _ => rng.u16(300..=399),
    };
    let location = match rng.u8(..4) {
        0 => None,
        1 => raw_value(rng, VOCABULARY).and_then(|v| v.to_str().ok().map(str::to_owned)),
        _ => {
            let sample = LOCATIONS[rng.usize(..LOCATIONS.len())];
            Some(match rng.bool() {
                true => sample.to_owned(),
                false => input::mutate_chars(rng, sample, VOCABULARY),
            })
        }
    };
    let hop = decode::next_hop(status, location.as_deref(), &origin);
    let Hop::Follow(url) = hop else {
        return;
    };
    assert!(matches!(status, 301 | 302 | 307 | 308), "{status} followed");
    let to = Origin::of(&url).unwrap_or_else(|| panic!("followed to {url:?}, not a URL"));
    let location = location.as_deref().unwrap_or_default().trim();
    if location.starts_with('/') {
        assert!(
            origin.owns(&url),
            "the path {location:?} left the API host: {url}"
        );
    } else {
        assert_eq!(origin.owns(&url), to == origin, "{url}");
    }
}

fn rate_limit(rng: &mut Rng) {
    const NAMES: &[&str] = &["retry-after", "x-ratelimit-remaining", "x-ratelimit-reset"];
    let now: i64 = match rng.u8(..8) {
        0 => rng.i64(i64::MAX - 10_000_000..),
        1 => rng.i64(0..1_000),
        _ => 1_700_000_000_000 + rng.i64(..1_000_000),
    };
    let mut headers = HeaderMap::new();
    for name in NAMES {
        let value = match rng.u8(..4) {
            0 => continue,
            1 => raw_value(rng, input::EDGE_NUMBERS),
            2 => HeaderValue::from_str(input::pick(rng, input::EDGE_NUMBERS)).ok(),
            _ => HeaderValue::from_str(&(now / 1000 + rng.i64(-100..5_000)).to_string()).ok(),
        };
        if let Some(value) = value {
            headers.insert(*name, value);
        }
    }
    let remaining = decode::rate_limit_remaining(&headers);
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    assert_eq!(
        remaining,
        text("x-ratelimit-remaining").and_then(|t| t.parse().ok())
    );
    let status = match rng.u8(..4) {
        0 => rng.u16(..),
        _ => [403, 429, 500, 502, 200, 404][rng.usize(..6)],
    };
    let attempt = rng.u32(1..=6);
    let outcome = Outcome::Answered {
        status,
        headers: &headers,
        rate_limit_hint: rng.bool(),
    };
    let method = [Method::GET, Method::POST, Method::PATCH][rng.usize(..3)].clone();
    let settings = RetrySettings::default();
    let decision = decide(&method, outcome, attempt, now, rng.f64(), &settings);
    let asked = text("retry-after").and_then(|t| t.parse::<u64>().ok());
    check_decision(status, attempt, now, asked, decision, &settings);
}

fn check_decision(
    status: u16,
    attempt: u32,
    now: i64,
    retry_after: Option<u64>,
    decision: RetryDecision,
    settings: &RetrySettings,
) {
    let hour = Duration::from_secs(3600);
    match decision {
        RetryDecision::Retry(wait) => {
            assert!(
                wait <= settings.max_wait.max(settings.max_backoff),
                "{wait:?}"
            );
        }
        RetryDecision::RateLimitedUntil(until) => {
            assert!(until >= now, "{until} is before {now}");
            assert!(
                until <= now.saturating_add(hour.as_millis() as i64),
                "{until}"
            );
        }
        _ => {}
    }
    if !matches!(status, 403 | 429) {
        return;
    }
    if let Some(secs) = retry_after {
        let wait = Duration::from_secs(secs).min(hour);
        let wanted = if wait <= settings.max_wait && attempt < settings.max_attempts {
            RetryDecision::Retry(wait)
        } else {
            RetryDecision::RateLimitedUntil(now.saturating_add(wait.as_millis() as i64))
        };
        assert_eq!(decision, wanted, "retry-after {secs}");
    }
}
