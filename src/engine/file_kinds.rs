//! Which changed files are tests, which are documentation and which are
//! source: the built-in task-type rules and the reproduction read the change
//! through these. Test files are recognised by the repository's `test_files`
//! globs, else by the common conventions of each ecosystem.

use super::paths::{PathPatterns, PatternError};

/// Test files by convention: Python, Go, JavaScript/TypeScript, Rust, Ruby,
/// Java/Kotlin, shell and any `test`/`tests` directory.
pub const DEFAULT_TEST_FILES: &[&str] = &[
    "test_*.py",
    "*_test.py",
    "conftest.py",
    "*_test.go",
    "*.test.*",
    "*.spec.*",
    "*_spec.rb",
    "*Test.java",
    "*Tests.java",
    "*Test.kt",
    "*.bats",
    "src/**/tests.rs",
    "test/**",
    "tests/**",
    "**/test/**",
    "**/tests/**",
    "**/__tests__/**",
    "spec/**",
];

/// Documentation by convention.
pub const DOC_FILES: &[&str] = &[
    "docs/**",
    "doc/**",
    "**/docs/**",
    "*.md",
    "*.mdx",
    "*.rst",
    "*.adoc",
    "*.txt",
    "README*",
    "CHANGELOG*",
];

/// What a changed file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Test,
    Docs,
    Source,
}

/// Sorts paths into tests, documentation and source.
#[derive(Debug, Clone)]
pub struct FileKinds {
    tests: PathPatterns,
    docs: PathPatterns,
}

impl FileKinds {
    /// With the repository's test globs (`None` or empty: the defaults).
    pub fn new(test_files: &[String]) -> Result<FileKinds, PatternError> {
        let tests = match test_files.is_empty() {
            true => PathPatterns::new(DEFAULT_TEST_FILES)?,
            false => PathPatterns::new(test_files)?,
        };
        Ok(FileKinds {
            tests,
            docs: PathPatterns::new(DOC_FILES)?,
        })
    }

    /// A test file wins over documentation (`tests/README.md` is a test
    /// fixture's), documentation over source.
    pub fn kind(&self, path: &str) -> FileKind {
        if self.tests.matches(path) {
            FileKind::Test
        } else if self.docs.matches(path) {
            FileKind::Docs
        } else {
            FileKind::Source
        }
    }

    pub fn is_test(&self, path: &str) -> bool {
        self.kind(path) == FileKind::Test
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conventions_of_each_ecosystem_are_recognised() {
        let k = FileKinds::new(&[]).unwrap();
        for test in [
            "test_calc.py",
            "pkg/calc_test.py",
            "calc_test.go",
            "web/a.test.ts",
            "web/a.spec.js",
            "src/parser/tests.rs",
            "tests/add.sh",
            "crates/x/tests/it.rs",
            "src/__tests__/a.js",
            "spec/calc_spec.rb",
            "src/test/java/CalcTest.java",
        ] {
            assert_eq!(k.kind(test), FileKind::Test, "{test}");
        }
        for doc in ["docs/guide.md", "README.md", "notes.rst", "CHANGELOG"] {
            assert_eq!(k.kind(doc), FileKind::Docs, "{doc}");
        }
        for src in [
            "calc.py",
            "src/lib.rs",
            "calc.sh",
            "web/app.ts",
            "testing.go",
        ] {
            assert_eq!(k.kind(src), FileKind::Source, "{src}");
        }
    }

    #[test]
    fn the_repository_globs_replace_the_defaults() {
        let k = FileKinds::new(&["checks/*.sh".to_owned()]).unwrap();
        assert!(k.is_test("checks/add.sh"));
        assert!(!k.is_test("tests/add.sh"));
    }
}
