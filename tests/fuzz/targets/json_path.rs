//! The `response_contains` goal's JSONPath subset (`$.a.b[0]`, `a.b`,
//! `$['a']`), over paths assembled from its syntax and paths that walk a
//! random JSON value.
//!
//! Property: a path built by walking a value finds the node it walked to.

use closer::engine::goals::json_path_get;
use fastrand::Rng;
use serde_json::Value;

use crate::driver::Target;
use crate::input;

pub const TARGET: Target = Target {
    name: "json_path",
    one,
};

const PIECES: &[&str] = &[
    "$", ".", "[", "]", "'", "\"", "0", "1", "a", "b", "[0]", "['a']", " ", "..", "[]",
];
const KEYS: &[&str] = &["a", "b", "items", "0", "x_y", "é", "🦀"];

fn one(rng: &mut Rng) {
    let value = tree(rng, 4);
    let _ = json_path_get(&value, &input::text(rng, PIECES, 12));
    let (path, node) = walk(rng, &value);
    assert_eq!(
        json_path_get(&value, &path),
        Some(node),
        "{path} in {value}"
    );
}

/// A random JSON tree of objects and arrays keyed from `KEYS`.
fn tree(rng: &mut Rng, depth: usize) -> Value {
    if depth == 0 || rng.u8(..4) == 0 {
        return input::scalar(rng, PIECES);
    }
    if rng.bool() {
        Value::Array((0..rng.usize(0..4)).map(|_| tree(rng, depth - 1)).collect())
    } else {
        let mut map = serde_json::Map::new();
        for _ in 0..rng.usize(0..4) {
            map.insert(input::pick(rng, KEYS).to_owned(), tree(rng, depth - 1));
        }
        Value::Object(map)
    }
}

/// A path to a random node of `value`, in one of the subset's spellings.
fn walk<'v>(rng: &mut Rng, value: &'v Value) -> (String, &'v Value) {
    let mut path = if rng.bool() {
        "$".to_owned()
    } else {
        String::new()
    };
    let mut node = value;
    loop {
        let next = match node {
            Value::Object(map) if !map.is_empty() && rng.u8(..4) != 0 => {
                let (key, child) = map.iter().nth(rng.usize(..map.len())).expect("in range");
                // A key that spells a number is read as an index in brackets.
                let spelled = match (rng.bool(), key.parse::<usize>().is_ok()) {
                    (true, false) => format!("['{key}']"),
                    _ => format!(".{key}"),
                };
                Some((spelled, child))
            }
            Value::Array(items) if !items.is_empty() && rng.u8(..4) != 0 => {
                let i = rng.usize(..items.len());
                Some((format!("[{i}]"), &items[i]))
            }
            _ => None,
        };
        let Some((part, child)) = next else {
            return (path, node);
        };
        path.push_str(&part);
        node = child;
    }
}
