//! The `Link` header of a paginated answer (RFC 8288, as GitHub writes it:
//! `<https://api.github.com/…&page=2>; rel="next", <…>; rel="last"`). Read
//! by the RFC's grammar rather than by splitting on `,` and `;`, which may
//! appear inside a URL or a quoted parameter: parameter names and relation
//! types are compared ignoring case, and only a link's first `rel` counts.

use http::HeaderMap;

/// The URL of the next page, when there is one.
pub fn next_page(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(http::header::LINK)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .find_map(|value| {
            let mut rest = value;
            while let Some((url, rel, after)) = first_link(rest) {
                if rel
                    .split_whitespace()
                    .any(|r| r.eq_ignore_ascii_case("next"))
                {
                    return Some(url.to_owned());
                }
                rest = after;
            }
            None
        })
}

/// The first link in `text`: its URL, its `rel` (empty when it has none)
/// and the text after the link.
fn first_link(text: &str) -> Option<(&str, String, &str)> {
    let start = text.find('<')?;
    let (url, mut rest) = text[start + 1..].split_once('>')?;
    let mut rel = None;
    while let Some(params) = rest.trim_start().strip_prefix(';') {
        let (name, value, after) = parameter(params);
        if rel.is_none() && name.eq_ignore_ascii_case("rel") {
            rel = Some(value);
        }
        rest = after;
    }
    let after = rest.find(',').map_or("", |i| &rest[i + 1..]);
    Some((url, rel.unwrap_or_default(), after))
}

/// The parameter at the start of `text` (after its `;`): its name, its
/// value (unquoted; empty when it has none) and the text after it.
fn parameter(text: &str) -> (&str, String, &str) {
    let end = text.find(['=', ';', ',']).unwrap_or(text.len());
    let name = text[..end].trim();
    let Some(rest) = text[end..].strip_prefix('=') else {
        return (name, String::new(), &text[end..]);
    };
    let rest = rest.trim_start();
    let Some(quoted) = rest.strip_prefix('"') else {
        let end = rest.find([';', ',']).unwrap_or(rest.len());
        return (name, rest[..end].trim().to_owned(), &rest[end..]);
    };
    let mut value = String::new();
    let mut chars = quoted.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return (name, value, &quoted[i + 1..]),
            '\\' => value.extend(chars.next().map(|(_, escaped)| escaped)),
            c => value.push(c),
        }
    }
    (name, value, "")
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

    /// Found by the `github_headers` fuzz target: the header was split on
    /// every `,` and `;`, so a URL or a quoted parameter holding one lost
    /// the next page, and `REL=next` or `rel = next` were not read.
    #[test]
    fn commas_and_semicolons_inside_a_link_do_not_split_it() {
        let link = r#"<https://h/x?a=1;b=2,c>; title="a, b; c"; rel="next""#;
        assert_eq!(
            next_page(&headers(link)).as_deref(),
            Some("https://h/x?a=1;b=2,c")
        );
        let link = r#"<https://h/1>; rel="prev", <https://h/3> ;REL = "last NEXT""#;
        assert_eq!(next_page(&headers(link)).as_deref(), Some("https://h/3"));
        let link = r#"<https://h/1>; rel=last; rel=next, <https://h/2>; rel=next"#;
        assert_eq!(
            next_page(&headers(link)).as_deref(),
            Some("https://h/2"),
            "a link's first rel counts"
        );
    }
}
