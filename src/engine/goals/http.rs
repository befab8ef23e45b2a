//! Live goals (`endpoint_responds`, `response_contains`): start the command
//! the goal names in its own process group, wait for the URL's port, make one
//! GET request, compare. What was started is always stopped (the group is
//! killed when the guard drops, on every path out of here). A response body
//! is read up to [`MAX_RESPONSE_BYTES`] as it streams; past that the goal
//! fails, named, instead of closer holding whatever the server sends.
//! Under bwrap, with closer's binary known and a URL on this machine, the
//! server runs in a network of its own, probed from inside its sandbox
//! (`probe.rs`). Otherwise it shares the host's network: the address must
//! be free when the goal starts (else it fails, named: whatever answered
//! would not be the goal's server), and live goals of one process take
//! turns on it.

use std::net::{IpAddr, SocketAddr};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::sandbox::GoalJail;
use super::{GoalContext, GoalLevel, GoalResult};
use crate::agent::confine::{Backend, Kind};
use crate::agent::process::{self, GroupGuard};
use crate::config::repo::MAX_GOAL_TIMEOUT_SECS;
use crate::config::repo::{GoalKind, GoalSpec};

/// How often the port is tried while the server starts.
const PORT_POLL: Duration = Duration::from_millis(100);

/// The most of a response body read; a larger one fails the goal.
pub(crate) const MAX_RESPONSE_BYTES: usize = 8 * 1024 * 1024;

/// How long a stopped server may take to release its port.
const STOP_GRACE: Duration = Duration::from_secs(5);

pub(super) struct Response {
    pub status: u16,
    pub body: String,
}

/// What a goal needs of the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Want {
    /// The status alone: the body is never read.
    Status,
    /// The status and the body (capped).
    Body,
}

/// Starts `command`, waits for `url`'s port, GETs `url`: in a network of
/// the server's own when bwrap confines goals and closer's binary is known
/// (`probe.rs`), else on the host's network.
async fn fetch(
    ctx: GoalContext<'_>,
    command: &str,
    url: &str,
    timeout: Duration,
    want: Want,
) -> Result<Response, String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("bad url: {e}"))?;
    let sandbox = GoalJail::new(ctx, Kind::Server)
        .await
        .map_err(|e| format!("could not prepare its sandbox: {e}"))?;
    if let (Some(prober), Backend::Bwrap { .. }) = (&ctx.settings.prober, sandbox.jail.backend())
        && let Some(addresses) = on_this_machine(&parsed).await
    {
        let local = super::probe::Local { url, addresses };
        return super::probe::fetch(ctx, prober, sandbox, command, local, timeout, want).await;
    }
    fetch_shared(ctx, sandbox, command, parsed, timeout, want).await
}

/// The most a host name's lookup may take when deciding where a URL leads.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

/// Where `url` leads when it names this machine, `None` when it does not:
/// only then can the goal's server be given a network of its own, which
/// reaches nothing else. This machine is `localhost`, a loopback or
/// unspecified address (IPv4-mapped ones too), or a name every address of
/// which is one (`localhost.`, an alias in `/etc/hosts`). Empty: the probe
/// resolves the host itself (an address, or `localhost`, which its
/// sandbox's `/etc/hosts` answers); else the addresses the name resolved to
/// here, which the probe connects to, since a name resolved by DNS cannot
/// be resolved in its network. A name that takes longer than
/// [`LOOKUP_TIMEOUT`] to resolve is taken for elsewhere.
async fn on_this_machine(url: &reqwest::Url) -> Option<Vec<SocketAddr>> {
    let local = |ip: IpAddr| {
        let ip = ip.to_canonical();
        ip.is_loopback() || ip.is_unspecified()
    };
    let host = url_host(url)?;
    if let Ok(ip) = host.parse() {
        return local(ip).then(Vec::new);
    }
    if host.eq_ignore_ascii_case("localhost") {
        return Some(Vec::new());
    }
    let port = url.port_or_known_default()?;
    let lookup = tokio::net::lookup_host((host, port));
    let found: Vec<SocketAddr> = tokio::time::timeout(LOOKUP_TIMEOUT, lookup)
        .await
        .ok()?
        .ok()?
        .collect();
    (!found.is_empty() && found.iter().all(|a| local(a.ip()))).then_some(found)
}

/// The URL's host as a connection takes it: an IPv6 address without the
/// brackets the URL writes it in.
pub(super) fn url_host(url: &reqwest::Url) -> Option<&str> {
    let host = url.host_str()?;
    Some(
        host.strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host),
    )
}

/// [`fetch`] on the host's network, shared with everything else there.
async fn fetch_shared(
    ctx: GoalContext<'_>,
    sandbox: GoalJail,
    command: &str,
    parsed: reqwest::Url,
    timeout: Duration,
    want: Want,
) -> Result<Response, String> {
    let host = url_host(&parsed).ok_or("url has no host")?.to_owned();
    let port = parsed.port_or_known_default().ok_or("url has no port")?;
    // One live goal per address at a time in this process, and none while
    // anything else answers there: the goal must hear its own server.
    let _port = port_lock(&host, port).await;
    if tokio::net::TcpStream::connect((host.as_str(), port))
        .await
        .is_ok()
    {
        return Err(format!(
            "{} already accepted connections before the command started: something \
             else listens there (another run's server or agent?), and the goal cannot tell \
             its own server from it",
            shown(&host, port)
        ));
    }
    let argv = vec!["sh".to_owned(), "-c".to_owned(), command.to_owned()];
    let (mut cmd, lifeline) =
        process::command(&argv, ctx.worktree, &sandbox.env, Some(&sandbox.jail))
            .map_err(|e| e.to_string())?;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = crate::agent::fork_lock::spawning(|| cmd.spawn())
        .map_err(|e| format!("could not start: {e}"))?;
    let mut group = GroupGuard::new(child.id(), lifeline);
    let target = Target {
        host: &host,
        port,
        url: parsed,
        addresses: Vec::new(),
    };
    let result = request(&mut child, target, timeout, want).await;
    // Stop what was started, and wait until it no longer listens, so a
    // following goal can bind the same port.
    group.stop(&mut child).await;
    let stop_deadline = Instant::now() + STOP_GRACE;
    while Instant::now() < stop_deadline
        && tokio::net::TcpStream::connect((host.as_str(), port))
            .await
            .is_ok()
    {
        tokio::time::sleep(PORT_POLL).await;
    }
    // A server that killed its reaper (no sandbox, Landlock below ABI 6)
    // may have left what answered behind: its answer proves nothing.
    if !group.cleaned_up() {
        let program = "the goal's server command".to_owned();
        return Err(process::ProcessError::Escaped { program }.to_string());
    }
    result
}

/// The lock on `host:port` that live goals of this process take for as
/// long as their server runs.
async fn port_lock(host: &str, port: u16) -> tokio::sync::OwnedMutexGuard<()> {
    type Locks = std::collections::HashMap<(String, u16), Arc<tokio::sync::Mutex<()>>>;
    static LOCKS: std::sync::LazyLock<std::sync::Mutex<Locks>> =
        std::sync::LazyLock::new(Default::default);
    let lock = {
        let mut locks = LOCKS.lock().unwrap_or_else(|e| e.into_inner());
        locks
            .entry((host.to_ascii_lowercase(), port))
            .or_default()
            .clone()
    };
    lock.lock_owned().await
}

/// `host:port` as a URL writes it (an IPv6 address in brackets).
fn shown(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Where the goal's request goes.
pub(super) struct Target<'a> {
    pub host: &'a str,
    pub port: u16,
    pub url: reqwest::Url,
    /// What `host` resolved to elsewhere, used instead of resolving it
    /// again; empty: resolve it.
    pub addresses: Vec<SocketAddr>,
}

/// Waits for `target`'s port while `child` (the server) runs, then makes
/// the request; the body is read only when it is wanted.
pub(super) async fn request(
    child: &mut tokio::process::Child,
    target: Target<'_>,
    timeout: Duration,
    want: Want,
) -> Result<Response, String> {
    let Target {
        host,
        port,
        url,
        addresses,
    } = target;
    let deadline = Instant::now()
        .checked_add(timeout)
        .unwrap_or_else(|| Instant::now() + Duration::from_secs(MAX_GOAL_TIMEOUT_SECS));
    loop {
        let open = if addresses.is_empty() {
            tokio::net::TcpStream::connect((host, port)).await
        } else {
            tokio::net::TcpStream::connect(&addresses[..]).await
        };
        if open.is_ok() {
            break;
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!(
                "command exited ({status}) before {} accepted connections",
                shown(host, port)
            ));
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "{} did not accept connections within {} s",
                shown(host, port),
                timeout.as_secs()
            ));
        }
        tokio::time::sleep(PORT_POLL).await;
    }
    crate::install_crypto_provider();
    let mut client = reqwest::Client::builder();
    if !addresses.is_empty() {
        client = client.resolve_to_addrs(host, &addresses);
    }
    let client = client
        .no_proxy()
        .timeout(
            deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_secs(1)),
        )
        .build()
        .map_err(|e| format!("http client: {e}"))?;
    let response = client
        .get(url)
        .send()
        .await
        .map_err(|e| format!("request failed: {e}"))?;
    let status = response.status().as_u16();
    let body = match want {
        Want::Status => String::new(),
        Want::Body => read_capped(response).await?,
    };
    Ok(Response { status, body })
}

/// The body as it streams in, refused past [`MAX_RESPONSE_BYTES`].
async fn read_capped(response: reqwest::Response) -> Result<String, String> {
    crate::body::read_capped(response, MAX_RESPONSE_BYTES)
        .await
        .map(|body| String::from_utf8_lossy(&body).into_owned())
        .map_err(|e| e.to_string())
}

/// The URL answers with the expected status.
pub(super) async fn endpoint_responds(
    ctx: GoalContext<'_>,
    level: GoalLevel,
    spec: &GoalSpec,
    command: &str,
    url: &str,
    expected: u16,
    timeout: Duration,
) -> GoalResult {
    let mut result = GoalResult::new(level, spec, url);
    match fetch(ctx, command, url, timeout, Want::Status).await {
        Ok(response) => {
            result.passed = response.status == expected;
            result.evidence = format!("status {} (expected {expected})", response.status);
        }
        Err(e) => result.evidence = e,
    }
    result
}

/// The response's JSON path equals `expected`, or the body contains `contains`.
pub(super) async fn response_contains(
    ctx: GoalContext<'_>,
    level: GoalLevel,
    spec: &GoalSpec,
    command: &str,
    url: &str,
    timeout: Duration,
) -> GoalResult {
    let mut result = GoalResult::new(level, spec, url);
    let GoalKind::ResponseContains {
        json_path,
        expected,
        contains,
        ..
    } = &spec.kind
    else {
        return result;
    };
    let response = match fetch(ctx, command, url, timeout, Want::Body).await {
        Ok(response) => response,
        Err(e) => {
            result.evidence = e;
            return result;
        }
    };
    // An error page that quotes the text (a 404 naming the path, a 500
    // printing the request) is not the answer asked for (decision 230).
    if !(200..300).contains(&response.status) {
        result.evidence = format!("status {}: not a success", response.status);
        return result;
    }
    if let Some(path) = json_path {
        let Ok(value) = serde_json::from_str::<serde_json::Value>(&response.body) else {
            result.evidence = format!("status {}; body is not JSON", response.status);
            return result;
        };
        let found = json_path_get(&value, path);
        result.passed = match (found, expected) {
            (Some(found), Some(expected)) => found == expected,
            (Some(_), None) => true,
            (None, _) => false,
        };
        result.evidence = match found {
            Some(found) => format!("{path} = {}", truncate(&found.to_string(), 80)),
            None => format!("{path} not found"),
        };
    } else if let Some(needle) = contains {
        result.passed = response.body.contains(needle.as_str());
        result.evidence = format!(
            "status {}; body {} the text",
            response.status,
            if result.passed { "contains" } else { "lacks" }
        );
    } else {
        result.not_runnable = true;
        result.evidence = "response_contains needs json_path or contains".into();
    }
    result
}

fn truncate(s: &str, n: usize) -> String {
    let mut out: String = s.chars().take(n).collect();
    if s.chars().count() > n {
        out.push('…');
    }
    out
}

/// A small JSONPath subset: `$.a.b[0].c` (also `a.b`, `$['a']`).
pub fn json_path_get<'v>(
    value: &'v serde_json::Value,
    path: &str,
) -> Option<&'v serde_json::Value> {
    let path = path.trim().trim_start_matches('$');
    let mut current = value;
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            current = current.get(&r[..end])?;
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let key = r[..end].trim_matches(['\'', '"']);
            current = match key.parse::<usize>() {
                Ok(i) => current.get(i)?,
                Err(_) => current.get(key)?,
            };
            rest = &r[end + 1..];
        } else {
            let end = rest.find(['.', '[']).unwrap_or(rest.len());
            current = current.get(&rest[..end])?;
            rest = &rest[end..];
        }
    }
    Some(current)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_an_address_of_this_machine_gets_a_network_of_its_own() {
        async fn here(u: &str) -> Option<Vec<SocketAddr>> {
            on_this_machine(&reqwest::Url::parse(u).unwrap()).await
        }
        for literal in [
            "http://127.0.0.1:8080/",
            "http://127.1.2.3/",
            "http://127.1:8080/",
            "http://LOCALHOST:3000/health",
            "http://[::1]:8080/",
            "http://0.0.0.0:8080/",
            "http://[::ffff:127.0.0.1]:8080/",
            "http://[::ffff:0.0.0.0]:8080/",
            "http://[::]:8080/",
        ] {
            assert_eq!(here(literal).await, Some(Vec::new()), "{literal}");
        }
        for elsewhere in [
            "http://10.0.0.1/",
            "http://[::ffff:10.0.0.1]/",
            "https://example.invalid/",
            "http://[fe80::1]/",
        ] {
            assert_eq!(here(elsewhere).await, None, "{elsewhere}");
        }
    }

    #[test]
    fn a_urls_host_is_taken_without_brackets() {
        let host = |u: &str| url_host(&reqwest::Url::parse(u).unwrap()).map(str::to_owned);
        assert_eq!(host("http://[::1]:8080/").as_deref(), Some("::1"));
        assert_eq!(
            host("http://[::ffff:127.0.0.1]/").as_deref(),
            Some("::ffff:7f00:1")
        );
        assert_eq!(host("http://127.0.0.1/").as_deref(), Some("127.0.0.1"));
        assert_eq!(host("http://Example.COM/").as_deref(), Some("example.com"));
        assert_eq!(shown("::1", 80), "[::1]:80");
        assert_eq!(shown("localhost", 80), "localhost:80");
    }

    /// A name other than `localhost` is resolved here, and taken for this
    /// machine when every address it has is one; the probe is given them.
    #[tokio::test]
    async fn a_name_that_resolves_to_this_machine_is_this_machine() {
        let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let name = name.trim();
        let resolved: Vec<SocketAddr> = match tokio::net::lookup_host((name, 80)).await {
            Ok(found) => found.collect(),
            Err(_) => Vec::new(),
        };
        if name.is_empty() || resolved.is_empty() {
            eprintln!("SKIPPED: this machine's name {name:?} does not resolve");
            return;
        }
        let url = reqwest::Url::parse(&format!("http://{name}:80/")).unwrap();
        let sorted = |mut found: Vec<SocketAddr>| {
            found.sort();
            found
        };
        let want = resolved
            .iter()
            .all(|a| a.ip().to_canonical().is_loopback())
            .then(|| sorted(resolved.clone()));
        let got = on_this_machine(&url).await.map(sorted);
        assert_eq!(got, want, "{resolved:?}");
    }

    #[test]
    fn json_path_subset() {
        let v = serde_json::json!({"a": {"b": [{"c": 1}, {"c": "x"}]}, "token": "t"});
        assert_eq!(
            json_path_get(&v, "$.a.b[1].c"),
            Some(&serde_json::json!("x"))
        );
        assert_eq!(json_path_get(&v, "$.token"), Some(&serde_json::json!("t")));
        assert_eq!(
            json_path_get(&v, "a.b[0]['c']"),
            Some(&serde_json::json!(1))
        );
        assert_eq!(json_path_get(&v, "$.missing"), None);
        assert_eq!(json_path_get(&v, "$"), Some(&v));
    }
}
