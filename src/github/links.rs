//! The `Link` header of a paginated answer (RFC 8288, as GitHub writes it:
//! `<https://api.github.com/…&page=2>; rel="next", <…>; rel="last"`).

use http::HeaderMap;

/// The URL of the next page, when there is one.
pub(crate) fn next_page(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(http::header::LINK)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .find_map(|link| {
            let (target, params) = link.trim().split_once(';')?;
            let is_next = params
                .split(';')
                .filter_map(|p| p.trim().strip_prefix("rel="))
                .any(|rel| {
                    rel.trim_matches('"')
                        .split_whitespace()
                        .any(|r| r == "next")
                });
            let url = target.trim().strip_prefix('<')?.strip_suffix('>')?;
            is_next.then(|| url.to_owned())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(link: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(http::header::LINK, link.parse().unwrap());
        headers
    }

    #[test]
    fn finds_the_next_page_among_the_links() {
        let link = r#"<https://api.github.com/repositories/1/labels?per_page=100&page=2>; rel="next", <https://api.github.com/repositories/1/labels?per_page=100&page=5>; rel="last""#;
        assert_eq!(
            next_page(&headers(link)).as_deref(),
            Some("https://api.github.com/repositories/1/labels?per_page=100&page=2")
        );
        let last = r#"<https://api.github.com/x?page=1>; rel="prev", <https://api.github.com/x?page=1>; rel="first""#;
        assert_eq!(next_page(&headers(last)), None);
        assert_eq!(next_page(&HeaderMap::new()), None);
        assert_eq!(next_page(&headers("garbage; rel=next")), None);
    }
}
