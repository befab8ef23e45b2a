//! Redirects, as GitHub sends them: a renamed or transferred repository
//! answers `301` (reads) or `307` (writes) with `Location` naming the
//! resource's new address, which a client must follow (GitHub's REST docs,
//! "Follow redirects"). Followed: 301, 302, 307 and 308, the method and body
//! kept, at most [`MAX_REDIRECTS`] hops, to a `Location` that is an
//! absolute URL or a path on the API's host and that makes a valid URL. Any
//! other 3xx but 304 (an ETag match) is an error, never a success. The token goes only to the API's own
//! host: a hop to another host is sent without `Authorization`.

/// Hops followed before the answer is an error.
pub(crate) const MAX_REDIRECTS: usize = 5;

/// What to do with an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hop {
    /// Not a redirect: the answer stands (2xx, 304, 4xx, 5xx).
    Answer,
    /// Send the request again to this absolute URL.
    Follow(String),
    /// A 3xx closer does not follow (300, 303, 305, a missing or unusable
    /// `Location`, one that is no valid URL): an error.
    Refuse,
}

/// The scheme and host (with port) of the API root, `https://api.github.com`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    scheme: String,
    authority: String,
}

impl Origin {
    /// The origin of `GITHUB_API_URL`; `None` when it is not an absolute URL.
    pub fn of(url: &str) -> Option<Origin> {
        let uri: http::Uri = url.parse().ok()?;
        Some(Origin {
            scheme: uri.scheme_str()?.to_ascii_lowercase(),
            authority: uri.authority()?.as_str().to_ascii_lowercase(),
        })
    }

    /// Whether `target` (a path, or an absolute URL) goes to this origin.
    /// A path is relative to the API root, so it does.
    pub fn owns(&self, target: &str) -> bool {
        if target.starts_with('/') {
            return true;
        }
        Origin::of(target).as_ref() == Some(self)
    }
}

/// The next hop for an answer with `status` and `location`, relative to
/// the API's `origin`.
pub fn next_hop(status: u16, location: Option<&str>, origin: &Origin) -> Hop {
    match status {
        301 | 302 | 307 | 308 => {
            let target = match location.map(str::trim) {
                Some(to) if to.starts_with("https://") || to.starts_with("http://") => {
                    to.to_owned()
                }
                Some(to) if to.starts_with('/') && !to.starts_with("//") => {
                    format!("{}://{}{to}", origin.scheme, origin.authority)
                }
                _ => return Hop::Refuse,
            };
            // A target that is no URL could only fail as a request to build.
            match Origin::of(&target) {
                Some(_) => Hop::Follow(target),
                None => Hop::Refuse,
            }
        }
        304 => Hop::Answer,
        300..=399 => Hop::Refuse,
        _ => Hop::Answer,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn github() -> Origin {
        Origin::of("https://api.github.com").unwrap()
    }

    #[test]
    fn the_four_redirects_are_followed_and_others_refused() {
        let to = "https://api.github.com/repositories/42/issues/1";
        for status in [301, 302, 307, 308] {
            assert_eq!(
                next_hop(status, Some(to), &github()),
                Hop::Follow(to.to_owned())
            );
        }
        for status in [300, 303, 305, 306] {
            assert_eq!(next_hop(status, Some(to), &github()), Hop::Refuse);
        }
        assert_eq!(next_hop(301, None, &github()), Hop::Refuse);
        assert_eq!(
            next_hop(301, Some("repositories/42"), &github()),
            Hop::Refuse
        );
        assert_eq!(
            next_hop(301, Some("//evil.example/x"), &github()),
            Hop::Refuse
        );
        for status in [200, 201, 204, 304, 404, 500] {
            assert_eq!(next_hop(status, Some(to), &github()), Hop::Answer);
        }
    }

    /// Found by the `github_headers` fuzz target: a `Location` with a space
    /// (or another character no URL holds) was followed, and the request
    /// then failed to build as a configuration error.
    #[test]
    fn a_location_that_is_no_url_is_refused() {
        for to in [
            "/repositories/1 s/1",
            "https://api.github.com/a b",
            "/repositories/1\u{7f}",
            "https://",
        ] {
            assert_eq!(next_hop(301, Some(to), &github()), Hop::Refuse, "{to}");
        }
        let control = "/repositories/1%20s/1";
        assert_eq!(
            next_hop(301, Some(control), &github()),
            Hop::Follow(format!("https://api.github.com{control}"))
        );
    }

    #[test]
    fn a_path_location_stays_on_the_api_host() {
        let ghe = Origin::of("https://ghe.example.com/api/v3").unwrap();
        assert_eq!(
            next_hop(307, Some("/api/v3/repositories/7"), &ghe),
            Hop::Follow("https://ghe.example.com/api/v3/repositories/7".to_owned())
        );
    }

    #[test]
    fn only_the_api_host_is_trusted_with_the_token() {
        let origin = Origin::of("http://127.0.0.1:8080").unwrap();
        assert!(origin.owns("/repos/o/r"));
        assert!(origin.owns("http://127.0.0.1:8080/repositories/1"));
        assert!(!origin.owns("http://127.0.0.1:8081/repositories/1"));
        assert!(!origin.owns("https://127.0.0.1:8080/repositories/1"));
        assert!(!origin.owns("http://evil.example/repositories/1"));
        assert!(github().owns("https://API.GITHUB.COM/x"));
    }
}
