//! "Did you mean": the command closest to a mistyped word by edit distance
//! (adjacent transpositions count as one edit, so `sotp` is one edit from
//! `stop`). It must never suggest something far from what was typed: a
//! wrong suggestion is worse than none.

use super::Command;

/// Words longer than this are not typos of any command; no suggestion.
const MAX_WORD_CHARS: usize = 12;

/// The command closest to `word`, if close enough: at most one edit from a
/// command of up to four letters, at most two from a longer one. Ties go to
/// the command listed first by [`Command::all`].
pub(super) fn closest(word: &str) -> Option<Command> {
    if word.is_empty() || word.chars().nth(MAX_WORD_CHARS).is_some() {
        return None;
    }
    let word: Vec<char> = word.to_lowercase().chars().collect();
    let mut best: Option<(usize, Command)> = None;
    for command in Command::all() {
        let name: Vec<char> = command.as_str().chars().collect();
        let allowed = if name.len() <= 4 { 1 } else { 2 };
        let distance = edit_distance(&word, &name);
        if distance <= allowed && best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, command));
        }
    }
    best.map(|(_, command)| command)
}

/// Optimal-string-alignment distance: insertions, deletions, substitutions
/// and swaps of two adjacent characters each cost one.
fn edit_distance(a: &[char], b: &[char]) -> usize {
    // rows[i][j] = distance between a[..i] and b[..j]; three rows suffice.
    let width = b.len() + 1;
    let mut before: Vec<usize> = vec![0; width];
    let mut previous: Vec<usize> = (0..width).collect();
    let mut current: Vec<usize> = vec![0; width];
    for i in 1..=a.len() {
        current[0] = i;
        for j in 1..width {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (previous[j] + 1)
                .min(current[j - 1] + 1)
                .min(previous[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(before[j - 2] + 1);
            }
            current[j] = best;
        }
        std::mem::swap(&mut before, &mut previous);
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn distance(a: &str, b: &str) -> usize {
        let a: Vec<char> = a.chars().collect();
        let b: Vec<char> = b.chars().collect();
        edit_distance(&a, &b)
    }

    #[test]
    fn distances() {
        assert_eq!(distance("", ""), 0);
        assert_eq!(distance("run", ""), 3);
        assert_eq!(distance("", "run"), 3);
        assert_eq!(distance("run", "run"), 0);
        assert_eq!(distance("rerty", "retry"), 1);
        assert_eq!(distance("sotp", "stop"), 1);
        assert_eq!(distance("stat", "status"), 2);
        assert_eq!(distance("kitten", "sitting"), 3);
    }

    #[test]
    fn suggestions() {
        let cases = [
            ("rerty", Some(Command::Retry)),
            ("sotp", Some(Command::Stop)),
            ("stauts", Some(Command::Status)),
            ("stat", Some(Command::Status)),
            ("rnu", Some(Command::Run)),
            ("RUNN", Some(Command::Run)),
            ("top", Some(Command::Stop)),
            ("retyr", Some(Command::Retry)),
            ("help", None),
            ("xyz", None),
            ("deploy", None),
            ("r", None),
            ("", None),
            ("runrunrunrunrun", None),
        ];
        for (word, expected) in cases {
            assert_eq!(closest(word), expected, "word {word:?}");
        }
    }
}
