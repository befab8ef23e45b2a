//! GitHub's rules for pushes, held with the real `git receive-pack`.
//!
//! - **Workflow files**: commits that create or update a file under
//!   `.github/workflows/` are refused to a GitHub App unless its token holds
//!   `workflows: write`, which the test App is never granted. GitHub names
//!   the first such file as the ref's rejection reason:
//!
//!   ```text
//!    ! [remote rejected] a -> a (refusing to allow a GitHub App to create or update workflow `.github/workflows/ci.yml` without `workflows` permission)
//!   ```
//!
//! - **Repository rules** (rulesets), when a test sets one with
//!   [`require`]: "Require signed commits" declines a push with an unsigned
//!   commit, listing the rule in `remote:` lines (GH013) and giving the ref
//!   `(push declined due to repository rule violations)`.
//!
//! A `pre-receive` hook decides (a hook alone can only make git say
//! "pre-receive hook declined"): it writes GitHub's reason to a file named
//! by the request, and the answer's report is rewritten to carry it, as
//! GitHub's does.

use std::path::Path;

/// The hook: for each updated ref, each commit new to the repository
/// (merges against their first parent, as a merged branch's workflow
/// change is refused too) is held to the rules. It runs in the bare
/// repository, where `closer-fake-rules` lists the rulesets set.
const PRE_RECEIVE: &str = r#"#!/bin/sh
# Only pushes over the fake's HTTP are held to GitHub's rules; a test's own
# push by file path is not.
[ -n "$CLOSER_FAKE_REFUSAL" ] || exit 0
zero=0000000000000000000000000000000000000000
refuse() {
  printf '%s' "$1" > "$CLOSER_FAKE_REFUSAL"
  exit 1
}
while read -r old new ref; do
  [ "$new" = "$zero" ] && continue
  for commit in $(git rev-list "$new" --not --all); do
    if grep -qx signed-commits closer-fake-rules 2>/dev/null &&
      ! git cat-file commit "$commit" | grep -q '^gpgsig '; then
      printf 'error: GH013: Repository rule violations found for %s.\n' "$ref" >&2
      printf 'Review all repository rules at https://github.com/rules\n\n' >&2
      printf -- '- Commits must have verified signatures.\n' >&2
      printf '  Found 1 violation:\n\n  %s\n\n' "$commit" >&2
      refuse 'push declined due to repository rule violations'
    fi
    file=$(git diff-tree -r --root --no-commit-id --name-only -m --first-parent "$commit" -- .github/workflows | head -n 1)
    if [ -n "$file" ]; then
      refuse "refusing to allow a GitHub App to create or update workflow \`$file\` without \`workflows\` permission"
    fi
  done
done
exit 0
"#;

/// The environment variable naming the file the hook writes its reason to.
pub const REASON_FILE_VAR: &str = "CLOSER_FAKE_REFUSAL";

/// A ruleset the fake can set on a repository.
#[derive(Debug, Clone, Copy)]
pub enum Ruleset {
    /// "Require signed commits", on every branch.
    SignedCommits,
}

/// Sets `ruleset` on the bare repository the fake serves.
pub fn require(bare: &Path, ruleset: Ruleset) {
    let name = match ruleset {
        Ruleset::SignedCommits => "signed-commits",
    };
    let file = bare.join("closer-fake-rules");
    let mut rules = std::fs::read_to_string(&file).unwrap_or_default();
    rules.push_str(name);
    rules.push('\n');
    std::fs::write(file, rules).expect("the rules file");
}

/// Installs the rules in the bare repository the fake serves.
pub fn install(bare: &Path) {
    let hook = bare.join("hooks").join("pre-receive");
    std::fs::create_dir_all(hook.parent().expect("hooks dir")).expect("hooks dir");
    crate::support::write_executable(&hook, PRE_RECEIVE);
}

/// `receive-pack`'s answer with each ref the hook declined given `reason`
/// instead. The report (`unpack ok`, then `ok <ref>` or `ng <ref> <why>`)
/// is a stream of pkt-lines, carried in band 1 of side-band packets when
/// the client asked for them (git does).
pub fn with_reason(answer: &[u8], reason: &str) -> Vec<u8> {
    let Some(packets) = packets(answer) else {
        return answer.to_vec();
    };
    let banded = packets
        .iter()
        .flatten()
        .next()
        .is_some_and(|p| !p.starts_with(b"unpack"));
    if !banded {
        return report_with_reason(answer, reason);
    }
    let report: Vec<u8> = packets
        .iter()
        .flatten()
        .filter(|p| p.first() == Some(&1))
        .flat_map(|p| p[1..].iter().copied())
        .collect();
    let mut report = Some([&[1u8][..], &report_with_reason(&report, reason)].concat());
    let mut out = Vec::new();
    for packet in &packets {
        match packet {
            None => out.extend_from_slice(b"0000"),
            Some(p) if p.first() == Some(&1) => {
                if let Some(r) = report.take() {
                    write_packet(&mut out, &r);
                }
            }
            Some(p) => write_packet(&mut out, p),
        }
    }
    out
}

fn report_with_reason(report: &[u8], reason: &str) -> Vec<u8> {
    const DECLINED: &str = " pre-receive hook declined\n";
    let Some(packets) = packets(report) else {
        return report.to_vec();
    };
    let mut out = Vec::new();
    for packet in packets {
        let Some(line) = packet else {
            out.extend_from_slice(b"0000");
            continue;
        };
        let text = String::from_utf8_lossy(line);
        match text
            .strip_prefix("ng ")
            .and_then(|r| r.strip_suffix(DECLINED))
        {
            Some(name) => write_packet(&mut out, format!("ng {name} {reason}\n").as_bytes()),
            None => write_packet(&mut out, line),
        }
    }
    out
}

/// The pkt-lines of `data` (`None` for a flush), or `None` if it is not
/// made of them.
fn packets(data: &[u8]) -> Option<Vec<Option<&[u8]>>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < data.len() {
        let head = std::str::from_utf8(data.get(at..at + 4)?).ok()?;
        let len = usize::from_str_radix(head, 16).ok()?;
        if len == 0 {
            out.push(None);
            at += 4;
            continue;
        }
        out.push(Some(data.get(at + 4..at + len)?));
        at += len;
    }
    Some(out)
}

fn write_packet(out: &mut Vec<u8>, payload: &[u8]) {
    out.extend_from_slice(format!("{:04x}", payload.len() + 4).as_bytes());
    out.extend_from_slice(payload);
}
