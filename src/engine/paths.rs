//! Path patterns of the repo config (`allowed_paths`, goal `pattern`s):
//! globs with `**`; a pattern without `/` matches the file name at any depth
//! (as in `.gitignore`), so `*.test.*` finds `src/a.test.js`.

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

/// A compiled set of patterns.
#[derive(Debug, Clone)]
pub struct PathPatterns {
    full: GlobSet,
    names: GlobSet,
}

/// A pattern that is not a valid glob.
#[derive(Debug, thiserror::Error)]
#[error("invalid path pattern `{pattern}`: {reason}")]
pub struct PatternError {
    pub pattern: String,
    pub reason: String,
}

impl PathPatterns {
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> Result<PathPatterns, PatternError> {
        let mut full = GlobSetBuilder::new();
        let mut names = GlobSetBuilder::new();
        for pattern in patterns {
            let pattern = pattern.as_ref().trim_start_matches("./");
            let glob = GlobBuilder::new(pattern)
                .literal_separator(true)
                .build()
                .map_err(|e| PatternError {
                    pattern: pattern.to_owned(),
                    reason: e.kind().to_string(),
                })?;
            if pattern.contains('/') {
                full.add(glob);
            } else {
                names.add(glob);
            }
        }
        let build = |b: GlobSetBuilder| {
            b.build().map_err(|e| PatternError {
                pattern: patterns
                    .iter()
                    .map(|p| p.as_ref())
                    .collect::<Vec<_>>()
                    .join(", "),
                reason: e.to_string(),
            })
        };
        Ok(PathPatterns {
            full: build(full)?,
            names: build(names)?,
        })
    }

    /// Whether a repository-relative path matches any pattern.
    pub fn matches(&self, path: &str) -> bool {
        let name = path.rsplit('/').next().unwrap_or(path);
        self.full.is_match(path) || self.names.is_match(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_and_bare_names() {
        let p = PathPatterns::new(&["src/**", "*.test.*"]).unwrap();
        assert!(p.matches("src/a/b.rs"));
        assert!(p.matches("web/x/a.test.js"));
        assert!(!p.matches("charts/values.yaml"));
        assert!(!PathPatterns::new(&["src/*"]).unwrap().matches("src/a/b.rs"));
        assert!(PathPatterns::new(&["src/[a"]).is_err());
    }
}
