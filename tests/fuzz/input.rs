//! Input generators shared by the targets: raw bytes, text assembled from a
//! target's own vocabulary, mutations of real samples (line-wise and
//! character-wise), and mutations of JSON values that keep the document
//! well-formed so the parser behind the JSON reader is reached.

use fastrand::Rng;
use serde_json::{Map, Value};

/// Characters that break naive parsers: controls, line ends, quotes,
/// multi-byte and zero-width characters, a replacement character.
const ODD: &[char] = &[
    '\0', '\t', '\r', '\n', '\u{b}', '\u{c}', '\u{7f}', '"', '\'', '\\', '`', '$', '{', '}', '[',
    ']', '#', '-', ':', '@', '/', '\u{a0}', '\u{200b}', '\u{feff}', '\u{fffd}', 'é', '🦀', '日',
    '\u{202e}',
];

/// Numbers at the edges.
pub const EDGE_NUMBERS: &[&str] = &[
    "0",
    "-1",
    "1",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "18446744073709551615",
    "18446744073709551616",
    "-9223372036854775808",
    "99999999999999999999999",
    "1e308",
    "NaN",
    "",
];

/// Up to `max` random bytes, often valid UTF-8.
pub fn bytes(rng: &mut Rng, max: usize) -> Vec<u8> {
    if rng.bool() {
        return text(rng, &[], max).into_bytes();
    }
    let len = rng.usize(0..=max);
    (0..len).map(|_| rng.u8(..)).collect()
}

/// One character: mostly printable ASCII, sometimes an odd one or any.
pub fn char(rng: &mut Rng) -> char {
    match rng.u8(..) {
        0..=179 => rng.char(' '..='~'),
        180..=239 => ODD[rng.usize(..ODD.len())],
        _ => rng.char(..),
    }
}

/// Up to `max` pieces, each one of `vocabulary` or a random character.
pub fn text(rng: &mut Rng, vocabulary: &[&str], max: usize) -> String {
    let len = rng.usize(0..=max);
    let mut out = String::new();
    for _ in 0..len {
        if !vocabulary.is_empty() && rng.u8(..) < 200 {
            out.push_str(vocabulary[rng.usize(..vocabulary.len())]);
        } else {
            out.push(char(rng));
        }
    }
    out
}

/// One of `items`.
pub fn pick<'a, T: ?Sized>(rng: &mut Rng, items: &[&'a T]) -> &'a T {
    items[rng.usize(..items.len())]
}

/// `sample` changed a little: a few line-wise and character-wise edits.
pub fn mutate_text(rng: &mut Rng, sample: &str, vocabulary: &[&str]) -> String {
    let mut lines: Vec<String> = sample.split('\n').map(str::to_owned).collect();
    for _ in 0..rng.usize(1..=4) {
        mutate_lines(rng, &mut lines, vocabulary);
    }
    lines.join(if rng.u8(..) < 16 { "\r\n" } else { "\n" })
}

fn mutate_lines(rng: &mut Rng, lines: &mut Vec<String>, vocabulary: &[&str]) {
    if lines.is_empty() {
        lines.push(String::new());
    }
    let at = rng.usize(..lines.len());
    match rng.u8(..8) {
        0 => {
            lines.remove(at);
        }
        1 => {
            let copy = lines[at].clone();
            let to = rng.usize(..=lines.len());
            lines.insert(to, copy);
        }
        2 => lines.insert(at, text(rng, vocabulary, 8)),
        3 => lines.truncate(at),
        4 => {
            let line = std::mem::take(&mut lines[at]);
            lines[at] = mutate_chars(rng, &line, vocabulary);
        }
        5 => {
            let from = rng.usize(..lines.len());
            lines.swap(at, from);
        }
        6 => lines[at].push_str(pick(rng, EDGE_NUMBERS)),
        _ => {
            let line = std::mem::take(&mut lines[at]);
            lines[at] = replace_numbers(rng, &line);
        }
    }
}

/// One character-level edit at a character boundary.
pub fn mutate_chars(rng: &mut Rng, line: &str, vocabulary: &[&str]) -> String {
    let bounds: Vec<usize> = line
        .char_indices()
        .map(|(i, _)| i)
        .chain([line.len()])
        .collect();
    let a = bounds[rng.usize(..bounds.len())];
    let b = bounds[rng.usize(..bounds.len())];
    let (a, b) = (a.min(b), a.max(b));
    match rng.u8(..4) {
        0 => format!("{}{}", &line[..a], &line[b..]),
        1 => format!("{}{}{}", &line[..a], text(rng, vocabulary, 3), &line[a..]),
        2 => format!("{}{}{}", &line[..b], &line[a..b], &line[b..]),
        _ => format!("{}{}{}", &line[..a], char(rng), &line[b..]),
    }
}

/// Every run of digits replaced by an edge number, sometimes.
fn replace_numbers(rng: &mut Rng, line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut in_digits = false;
    for c in line.chars() {
        if c.is_ascii_digit() {
            if !in_digits && rng.bool() {
                out.push_str(pick(rng, EDGE_NUMBERS));
                in_digits = true;
                continue;
            }
            if in_digits {
                continue;
            }
        } else {
            in_digits = false;
        }
        out.push(c);
    }
    out
}

/// `value` with a few nodes replaced, removed or retyped; still JSON.
pub fn mutate_json(rng: &mut Rng, value: &mut Value, vocabulary: &[&str]) {
    for _ in 0..rng.usize(1..=6) {
        let depth = rng.usize(0..8);
        mutate_at(rng, value, depth, vocabulary);
    }
}

fn mutate_at(rng: &mut Rng, node: &mut Value, depth: usize, vocabulary: &[&str]) {
    if depth > 0 {
        let child = match node {
            Value::Object(map) if !map.is_empty() => {
                let i = rng.usize(..map.len());
                map.values_mut().nth(i)
            }
            Value::Array(items) if !items.is_empty() => {
                let i = rng.usize(..items.len());
                items.get_mut(i)
            }
            _ => None,
        };
        if let Some(child) = child {
            return mutate_at(rng, child, depth - 1, vocabulary);
        }
    }
    match (rng.u8(..4), &mut *node) {
        (0, Value::Object(map)) if !map.is_empty() => {
            let key = map.keys().nth(rng.usize(..map.len())).cloned();
            key.map(|k| map.remove(&k));
        }
        (1, Value::Object(map)) => {
            map.insert(text(rng, vocabulary, 2), scalar(rng, vocabulary));
        }
        (0, Value::Array(items)) if !items.is_empty() => {
            items.remove(rng.usize(..items.len()));
        }
        (1, Value::Array(items)) if !items.is_empty() => {
            let copy = items[rng.usize(..items.len())].clone();
            items.push(copy);
        }
        (2, Value::String(s)) => *s = mutate_chars(rng, s, vocabulary),
        _ => *node = scalar(rng, vocabulary),
    }
}

/// A JSON value of any type, small.
pub fn scalar(rng: &mut Rng, vocabulary: &[&str]) -> Value {
    match rng.u8(..9) {
        0 => Value::Null,
        1 => Value::Bool(rng.bool()),
        2 => serde_json::from_str(pick(rng, EDGE_NUMBERS)).unwrap_or(Value::Null),
        3 => Value::from(rng.i64(..)),
        4 => Value::from(rng.f64() * 1e6 - 5e5),
        5 => Value::Array(vec![]),
        6 => Value::Object(Map::new()),
        _ => Value::String(text(rng, vocabulary, 6)),
    }
}
