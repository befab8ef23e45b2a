//! The one retry policy for every GitHub call, as a pure function so each rule
//! is unit-tested: 5xx and network errors back off exponentially with jitter;
//! rate limits wait as long as GitHub says; 400/401/404/422 are final. It must
//! never repeat a POST that may already have been applied: neither one whose
//! answer was lost, nor one answered with a 5xx (GitHub's front end answers
//! 500/502 when it gives up on a request the API behind it may still
//! complete; probot/probot#921 posted one comment four times that way). The
//! caller of such a POST checks what happened (a comment by its marker, a
//! pull request by its branch) and the job that made it is retried.

use std::time::Duration;

use http::{HeaderMap, Method};

use crate::clock::Millis;

/// Knobs of the policy. Production uses [`RetrySettings::default`]; tests
/// shorten the waits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetrySettings {
    /// Attempts in total, the first one included.
    pub max_attempts: u32,
    /// Backoff before the second attempt; doubles each time.
    pub base_backoff: Duration,
    /// Longest backoff after a 5xx or network error.
    pub max_backoff: Duration,
    /// Longest rate-limit wait we sleep in-process; a longer one is returned
    /// as `GitHubError::RateLimited { until }` so the job queue reschedules.
    pub max_wait: Duration,
    /// Wait for a secondary rate limit that names no time.
    pub secondary_rate_limit_wait: Duration,
}

impl Default for RetrySettings {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            base_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            max_wait: Duration::from_secs(120),
            secondary_rate_limit_wait: Duration::from_secs(60),
        }
    }
}

/// What happened to one attempt.
#[derive(Debug, Clone, Copy)]
pub enum Outcome<'a> {
    /// GitHub answered. `rate_limit_hint` is true when the body mentions a
    /// rate limit (how a secondary-limit 403 without headers is told apart
    /// from a permission 403).
    Answered {
        status: u16,
        headers: &'a HeaderMap,
        rate_limit_hint: bool,
    },
    /// No answer. `maybe_sent` is false only when the connection was never
    /// established, so GitHub cannot have seen the request.
    NoAnswer { maybe_sent: bool },
}

/// The policy's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryDecision {
    /// The answer is final: success, or an error that repeating cannot fix.
    Final,
    /// Wait this long, then send again.
    Retry(Duration),
    /// A rate limit we will not wait out here: try again at this time.
    RateLimitedUntil(Millis),
    /// Retryable, but the attempts are used up.
    Exhausted,
    /// A non-idempotent request may have been applied: do not repeat it.
    MaybeApplied,
}

/// Decides what to do after attempt number `attempt` (1-based).
/// `jitter` is a random value in `[0, 1)`; `now` is the injected clock.
pub fn decide(
    method: &Method,
    outcome: Outcome<'_>,
    attempt: u32,
    now: Millis,
    jitter: f64,
    settings: &RetrySettings,
) -> RetryDecision {
    decide_with(
        is_idempotent(method),
        outcome,
        attempt,
        now,
        jitter,
        settings,
    )
}

/// [`decide`] for a request whose repeatability is known apart from its
/// method: a GraphQL query is a POST that only reads, so it is `repeatable`.
pub fn decide_with(
    repeatable: bool,
    outcome: Outcome<'_>,
    attempt: u32,
    now: Millis,
    jitter: f64,
    settings: &RetrySettings,
) -> RetryDecision {
    let more_allowed = attempt < settings.max_attempts;
    match outcome {
        Outcome::NoAnswer { maybe_sent } => {
            if maybe_sent && !repeatable {
                RetryDecision::MaybeApplied
            } else if more_allowed {
                RetryDecision::Retry(backoff(attempt, jitter, settings))
            } else {
                RetryDecision::Exhausted
            }
        }
        Outcome::Answered {
            status,
            headers,
            rate_limit_hint,
        } => match status {
            200..=399 => RetryDecision::Final,
            403 | 429 => match rate_limit_wait(status, headers, rate_limit_hint, now, settings) {
                None => RetryDecision::Final,
                Some(wait) if wait > settings.max_wait || !more_allowed => {
                    RetryDecision::RateLimitedUntil(now.saturating_add(wait.as_millis() as Millis))
                }
                Some(wait) => RetryDecision::Retry(wait),
            },
            500..=599 if !repeatable => RetryDecision::MaybeApplied,
            500..=599 if more_allowed => RetryDecision::Retry(backoff(attempt, jitter, settings)),
            500..=599 => RetryDecision::Exhausted,
            // 400, 401, 404, 422 and every other 4xx: repeating cannot help.
            _ => RetryDecision::Final,
        },
    }
}

/// GET, HEAD, PUT, PATCH and DELETE set state rather than add to it, so
/// sending them twice has the effect of sending them once. POST creates.
pub fn is_idempotent(method: &Method) -> bool {
    method != Method::POST
}

/// The longest wait a rate-limit answer is believed for: GitHub's primary
/// limit resets within the hour, so a `retry-after` or reset time past
/// that is a broken or hostile header, clamped here.
pub const MAX_RATE_LIMIT_WAIT: Duration = Duration::from_secs(3600);

/// How long a 403/429 asks us to wait (at most [`MAX_RATE_LIMIT_WAIT`]), or
/// `None` when it is not a rate limit.
fn rate_limit_wait(
    status: u16,
    headers: &HeaderMap,
    rate_limit_hint: bool,
    now: Millis,
    settings: &RetrySettings,
) -> Option<Duration> {
    asked_wait(status, headers, rate_limit_hint, now, settings).map(|w| w.min(MAX_RATE_LIMIT_WAIT))
}

fn asked_wait(
    status: u16,
    headers: &HeaderMap,
    rate_limit_hint: bool,
    now: Millis,
    settings: &RetrySettings,
) -> Option<Duration> {
    if let Some(secs) = header_u64(headers, "retry-after") {
        return Some(Duration::from_secs(secs));
    }
    if header_u64(headers, "x-ratelimit-remaining") == Some(0)
        && let Some(reset) = header_u64(headers, "x-ratelimit-reset")
    {
        let reset_ms = Millis::try_from(reset)
            .unwrap_or(Millis::MAX)
            .saturating_mul(1000);
        // A reset already past by closer's clock, while GitHub still says
        // none are left: closer's clock is ahead of GitHub's. Going again
        // at once would hammer a limited API (GitHub may block an App that
        // does); wait as for a limit that names no time (decision 259).
        return Some(match reset_ms.saturating_sub(now) {
            left if left > 0 => Duration::from_millis(left as u64),
            _ => settings.secondary_rate_limit_wait,
        });
    }
    if status == 429 || rate_limit_hint {
        return Some(settings.secondary_rate_limit_wait);
    }
    None
}

/// Exponential backoff with jitter: `base * 2^(attempt-1)`, capped, then
/// scaled into `[50%, 100%]` of itself so replicas do not retry in step.
fn backoff(attempt: u32, jitter: f64, settings: &RetrySettings) -> Duration {
    let exp = attempt.saturating_sub(1).min(20);
    let raw = settings.base_backoff.saturating_mul(1u32 << exp);
    let capped = raw.min(settings.max_backoff);
    capped.mul_f64(0.5 + 0.5 * jitter.clamp(0.0, 1.0))
}

/// The `x-ratelimit-remaining` header: calls left in the window, for the
/// metrics gauge. A count, so `NaN`, `inf` or `-1` are no value.
pub fn rate_limit_remaining(headers: &HeaderMap) -> Option<u64> {
    header_u64(headers, "x-ratelimit-remaining")
}

fn header_u64(headers: &HeaderMap, name: &str) -> Option<u64> {
    headers.get(name)?.to_str().ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    const NOW: Millis = 1_700_000_000_000;

    fn settings() -> RetrySettings {
        RetrySettings::default()
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        map
    }

    fn answered(
        method: Method,
        status: u16,
        h: &HeaderMap,
        hint: bool,
        attempt: u32,
    ) -> RetryDecision {
        let outcome = Outcome::Answered {
            status,
            headers: h,
            rate_limit_hint: hint,
        };
        decide(&method, outcome, attempt, NOW, 0.0, &settings())
    }

    #[test]
    fn success_and_not_modified_are_final() {
        let h = HeaderMap::new();
        assert_eq!(
            answered(Method::GET, 200, &h, false, 1),
            RetryDecision::Final
        );
        assert_eq!(
            answered(Method::GET, 304, &h, false, 1),
            RetryDecision::Final
        );
    }

    #[test]
    fn client_errors_are_never_retried() {
        let h = HeaderMap::new();
        for status in [400, 401, 404, 409, 422] {
            for method in [Method::GET, Method::POST, Method::PATCH] {
                assert_eq!(
                    answered(method.clone(), status, &h, false, 1),
                    RetryDecision::Final,
                    "{method} {status}"
                );
            }
        }
    }

    #[test]
    fn server_errors_back_off_exponentially_for_repeatable_requests() {
        let h = HeaderMap::new();
        // jitter 0 → half of the raw backoff.
        assert_eq!(
            answered(Method::GET, 502, &h, false, 1),
            RetryDecision::Retry(Duration::from_millis(250))
        );
        assert_eq!(
            answered(Method::PATCH, 500, &h, false, 2),
            RetryDecision::Retry(Duration::from_millis(500))
        );
        assert_eq!(
            answered(Method::GET, 503, &h, false, 3),
            RetryDecision::Retry(Duration::from_millis(1000))
        );
        let outcome = Outcome::Answered {
            status: 502,
            headers: &h,
            rate_limit_hint: false,
        };
        assert_eq!(
            decide_with(true, outcome, 1, NOW, 0.0, &settings()),
            RetryDecision::Retry(Duration::from_millis(250)),
            "a POST that is known to be repeatable"
        );
    }

    #[test]
    fn a_post_answered_with_a_server_error_may_have_been_applied() {
        let h = HeaderMap::new();
        for status in [500, 502, 503, 504] {
            assert_eq!(
                answered(Method::POST, status, &h, false, 1),
                RetryDecision::MaybeApplied,
                "{status}"
            );
        }
    }

    #[test]
    fn jitter_scales_backoff_between_half_and_full() {
        let s = settings();
        let full = backoff(3, 0.999_999, &s);
        assert!(full > Duration::from_millis(1990) && full <= Duration::from_secs(2));
        assert_eq!(backoff(3, 0.0, &s), Duration::from_secs(1));
        assert_eq!(backoff(30, 0.0, &s), s.max_backoff / 2, "capped");
    }

    #[test]
    fn attempts_are_capped() {
        let h = HeaderMap::new();
        assert_eq!(
            answered(Method::GET, 500, &h, false, 5),
            RetryDecision::Exhausted
        );
        let none = Outcome::NoAnswer { maybe_sent: false };
        assert_eq!(
            decide(&Method::GET, none, 5, NOW, 0.0, &settings()),
            RetryDecision::Exhausted
        );
    }

    #[test]
    fn retry_after_is_honoured_on_403_and_429() {
        let h = headers(&[("retry-after", "7")]);
        assert_eq!(
            answered(Method::POST, 403, &h, true, 1),
            RetryDecision::Retry(Duration::from_secs(7))
        );
        assert_eq!(
            answered(Method::GET, 429, &h, false, 1),
            RetryDecision::Retry(Duration::from_secs(7))
        );
    }

    #[test]
    fn exhausted_primary_limit_waits_until_reset() {
        let reset = (NOW / 1000 + 42).to_string();
        let h = headers(&[
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", &reset),
        ]);
        assert_eq!(
            answered(Method::GET, 403, &h, false, 1),
            RetryDecision::Retry(Duration::from_secs(42))
        );
        // A reset already in the past by closer's clock (ahead of GitHub's):
        // a minute, as for a limit that names no time; never at once.
        let past = (NOW / 1000 - 5).to_string();
        let h = headers(&[("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", &past)]);
        assert_eq!(
            answered(Method::GET, 403, &h, false, 1),
            RetryDecision::Retry(Duration::from_secs(60))
        );
    }

    #[test]
    fn secondary_limit_without_a_time_waits_at_least_a_minute() {
        let h = headers(&[("x-ratelimit-remaining", "12")]);
        let minute = RetryDecision::Retry(Duration::from_secs(60));
        assert_eq!(answered(Method::GET, 429, &h, false, 1), minute);
        // A 403 whose body says "secondary rate limit" but gives no time.
        assert_eq!(answered(Method::POST, 403, &h, true, 1), minute);
    }

    #[test]
    fn plain_permission_403_is_final() {
        let h = headers(&[("x-ratelimit-remaining", "4000")]);
        assert_eq!(
            answered(Method::GET, 403, &h, false, 1),
            RetryDecision::Final
        );
    }

    #[test]
    fn absurd_rate_limit_times_are_clamped_to_an_hour() {
        let hour = RetryDecision::RateLimitedUntil(NOW + 3_600_000);
        let h = headers(&[("retry-after", "18446744073709551615")]);
        assert_eq!(answered(Method::GET, 429, &h, false, 1), hour);
        let h = headers(&[
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", "18446744073709551615"),
        ]);
        assert_eq!(answered(Method::GET, 403, &h, false, 1), hour);
    }

    #[test]
    fn waits_longer_than_max_wait_are_handed_back() {
        let h = headers(&[("retry-after", "3600")]);
        assert_eq!(
            answered(Method::GET, 429, &h, false, 1),
            RetryDecision::RateLimitedUntil(NOW + 3_600_000)
        );
        // And the last attempt never sleeps on a rate limit.
        let h = headers(&[("retry-after", "1")]);
        assert_eq!(
            answered(Method::GET, 429, &h, false, 5),
            RetryDecision::RateLimitedUntil(NOW + 1_000)
        );
    }

    #[test]
    fn network_errors_after_sending_a_post_are_not_repeated() {
        let sent = Outcome::NoAnswer { maybe_sent: true };
        let s = settings();
        assert_eq!(
            decide(&Method::POST, sent, 1, NOW, 0.0, &s),
            RetryDecision::MaybeApplied
        );
        assert_eq!(
            decide(&Method::PATCH, sent, 1, NOW, 0.0, &s),
            RetryDecision::Retry(Duration::from_millis(250))
        );
        assert_eq!(
            decide(&Method::GET, sent, 1, NOW, 0.0, &s),
            RetryDecision::Retry(Duration::from_millis(250))
        );
        // A POST known to only read (a GraphQL query) may be repeated.
        assert_eq!(
            decide_with(true, sent, 1, NOW, 0.0, &s),
            RetryDecision::Retry(Duration::from_millis(250))
        );
        assert_eq!(
            decide_with(false, sent, 1, NOW, 0.0, &s),
            RetryDecision::MaybeApplied
        );
        let refused = Outcome::NoAnswer { maybe_sent: false };
        assert_eq!(
            decide(&Method::POST, refused, 1, NOW, 0.0, &s),
            RetryDecision::Retry(Duration::from_millis(250))
        );
    }
}
