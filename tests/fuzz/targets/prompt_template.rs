//! Prompt-override templates, which a repository may supply (untrusted):
//! the built-in prompts edited, and templates assembled from front matter
//! and minijinja's syntax (loops, filters, macros, recursion, big ranges),
//! rendered with random parameters.
//!
//! Properties: parsing and rendering end (the fuel limit holds: the slowest
//! input is in the report) with a value or an error, never a panic; a
//! parameter's value is data: it is rendered verbatim, never evaluated,
//! whatever template syntax it holds.

use std::sync::LazyLock;

use closer::prompts::template::PromptTemplate;
use fastrand::Rng;
use serde_json::{Value, json};

use crate::driver::Target;
use crate::input;

pub const TARGET: Target = Target {
    name: "prompt_template",
    one,
};

const PIECES: &[&str] = &[
    "{{ ",
    " }}",
    "{% ",
    " %}",
    "{# ",
    " #}",
    "{{- ",
    " -}}",
    "name",
    "items",
    "item",
    "for item in items",
    "endfor",
    "if name",
    "else",
    "endif",
    "range(",
    "100000",
    ")",
    "|upper",
    "|join(',')",
    "|length",
    "|tojson",
    "|indent(4)",
    "|replace('a', 'b')",
    "loop.index",
    "loop(",
    " recursive",
    "macro m(x)",
    "endmacro",
    "m(",
    "set x = ",
    "include 'x'",
    "extends 'y'",
    "block b",
    "endblock",
    "raw",
    "endraw",
    "~",
    " * ",
    " + ",
    "'",
    "\"",
    "[",
    "]",
    ".",
    "undefined_thing",
    "namespace()",
    "\n",
    "---\n",
    "params:\n",
    "  - name\n",
    "  - items\n",
    "description: x\n",
    "params: [name]\n",
];

/// The built-in prompts, as `PromptTemplate::parse` reads them.
static BUILTIN: LazyLock<Vec<String>> = LazyLock::new(|| {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts/steps");
    let mut texts = Vec::new();
    for step in std::fs::read_dir(root).expect("prompts/steps") {
        for kind in std::fs::read_dir(step.expect("entry").path()).expect("a step") {
            for file in std::fs::read_dir(kind.expect("entry").path()).expect("a kind") {
                texts.push(std::fs::read_to_string(file.expect("entry").path()).expect("a prompt"));
            }
        }
    }
    texts.sort();
    texts
});

fn one(rng: &mut Rng) {
    let value = input::text(rng, PIECES, 6);
    verbatim(&value);
    let text = match rng.u8(..4) {
        0 => {
            let sample = &BUILTIN[rng.usize(..BUILTIN.len())];
            input::mutate_text(rng, sample, PIECES)
        }
        1 => String::from_utf8_lossy(&input::bytes(rng, 120)).into_owned(),
        _ => input::text(rng, PIECES, 30),
    };
    let Ok(template) = PromptTemplate::parse("override", &text) else {
        return;
    };
    let mut params = json!({ "name": value, "items": [input::scalar(rng, PIECES), input::text(rng, PIECES, 3)] });
    for declared in &template.params {
        params[declared] = Value::String(input::text(rng, PIECES, 4));
    }
    let _ = template.render(&params);
}

static VERBATIM: LazyLock<PromptTemplate> = LazyLock::new(|| {
    PromptTemplate::parse("verbatim", "---\nparams: [v]\n---\n{{ v }}").expect("a valid template")
});

/// `{{ v }}` renders the value as it is.
fn verbatim(value: &str) {
    let rendered = VERBATIM.render(&json!({ "v": value })).expect("renders");
    assert_eq!(rendered, value, "a value was not rendered as it is");
}
