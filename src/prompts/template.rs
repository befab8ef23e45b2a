//! One prompt file: YAML front matter naming the required `params`, then a
//! minijinja template. Rendering is strict (an undefined variable is an
//! error) and fuel-limited, because repository overrides are untrusted text;
//! values are data and are never evaluated as templates.

use serde::Deserialize;

use crate::prompts::PromptError;

/// The most template instructions one render may run (bounds loops in an
/// untrusted override).
const FUEL: u64 = 200_000;

/// The front matter of a prompt file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct FrontMatter {
    /// Parameters the caller must supply.
    params: Vec<String>,
    /// What the prompt is for (documentation only).
    #[allow(dead_code)]
    description: Option<String>,
}

/// A parsed prompt file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize)]
pub struct PromptTemplate {
    /// Where it came from (for errors).
    pub name: String,
    /// Required parameters.
    pub params: Vec<String>,
    /// The template body.
    pub body: String,
}

impl PromptTemplate {
    /// Splits front matter from the body and checks both parse.
    pub fn parse(name: &str, text: &str) -> Result<Self, PromptError> {
        let bad = |message: String| PromptError::FrontMatter {
            prompt: name.to_owned(),
            message,
        };
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let (front, body) = match text
            .strip_prefix("---\n")
            .or_else(|| text.strip_prefix("---\r\n"))
        {
            None => (FrontMatter::default(), text),
            Some(rest) => {
                let end = rest
                    .find("\n---\n")
                    .map(|i| (i, i + 5))
                    .or_else(|| rest.find("\n---\r\n").map(|i| (i, i + 6)))
                    .or_else(|| rest.strip_suffix("\n---").map(|r| (r.len(), rest.len())))
                    .ok_or_else(|| bad("the front matter has no closing `---` line".to_owned()))?;
                let yaml = &rest[..end.0];
                let front: FrontMatter = if yaml.trim().is_empty() {
                    FrontMatter::default()
                } else {
                    serde_saphyr::from_str(yaml)
                        .map_err(|e| bad(e.without_snippet().to_string()))?
                };
                (front, &rest[end.1..])
            }
        };
        let template = Self {
            name: name.to_owned(),
            params: front.params,
            body: body.to_owned(),
        };
        // Syntax errors surface when the file is read, not at first use.
        environment()
            .template_from_str(&template.body)
            .map_err(|e| PromptError::Render {
                prompt: name.to_owned(),
                message: describe(&e),
            })?;
        Ok(template)
    }

    /// Renders with `params` (a JSON object). Every declared parameter must
    /// be present; any other undefined variable is an error too.
    pub fn render(&self, params: &serde_json::Value) -> Result<String, PromptError> {
        self.check_params(params)?;
        let env = environment();
        env.render_str(&self.body, params)
            .map_err(|e| PromptError::Render {
                prompt: self.name.clone(),
                message: describe(&e),
            })
    }
}

impl PromptTemplate {
    /// Every declared parameter is in `params` (a JSON object).
    pub fn check_params(&self, params: &serde_json::Value) -> Result<(), PromptError> {
        let given = params.as_object();
        match self
            .params
            .iter()
            .find(|p| !given.is_some_and(|m| m.contains_key(p.as_str())))
        {
            Some(missing) => Err(PromptError::MissingParam {
                prompt: self.name.clone(),
                param: missing.clone(),
            }),
            None => Ok(()),
        }
    }
}

fn environment() -> minijinja::Environment<'static> {
    let mut env = minijinja::Environment::new();
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    env.set_keep_trailing_newline(true);
    env.set_fuel(Some(FUEL));
    env
}

fn describe(e: &minijinja::Error) -> String {
    match e.line() {
        Some(line) => format!(
            "{} (template line {line})",
            e.detail().unwrap_or(&e.kind().to_string())
        ),
        None => e
            .detail()
            .map_or_else(|| e.kind().to_string(), str::to_owned),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn front_matter_declares_params_and_strict_rendering_refuses_gaps() {
        let t = PromptTemplate::parse("p.md", "---\nparams:\n  - who\n---\nHello {{ who }}!\n")
            .unwrap();
        assert_eq!(t.params, vec!["who"]);
        assert_eq!(t.render(&json!({"who": "you"})).unwrap(), "Hello you!\n");
        assert_eq!(
            t.render(&json!({})),
            Err(PromptError::MissingParam {
                prompt: "p.md".into(),
                param: "who".into()
            })
        );
        let loose = PromptTemplate::parse("q.md", "Hi {{ nobody }}").unwrap();
        assert!(matches!(
            loose.render(&json!({})),
            Err(PromptError::Render { .. })
        ));
    }

    #[test]
    fn values_are_not_evaluated_as_templates() {
        let t = PromptTemplate::parse("p.md", "{{ body }}").unwrap();
        assert_eq!(
            t.render(&json!({"body": "{{ 7 * 7 }}"})).unwrap(),
            "{{ 7 * 7 }}"
        );
    }

    #[test]
    fn broken_files_are_named() {
        assert!(matches!(
            PromptTemplate::parse("a.md", "---\nparams: [x]\nno end"),
            Err(PromptError::FrontMatter { prompt, .. }) if prompt == "a.md"
        ));
        assert!(matches!(
            PromptTemplate::parse("b.md", "---\nparam: [x]\n---\n"),
            Err(PromptError::FrontMatter { message, .. }) if message.contains("unknown field `param`")
        ));
        assert!(matches!(
            PromptTemplate::parse("c.md", "{% for x in %}"),
            Err(PromptError::Render { .. })
        ));
    }

    #[test]
    fn endless_loops_run_out_of_fuel() {
        let t = PromptTemplate::parse(
            "loop.md",
            "{% for a in range(10000) %}{% for b in range(10000) %}x{% endfor %}{% endfor %}",
        )
        .unwrap();
        assert!(matches!(
            t.render(&json!({})),
            Err(PromptError::Render { .. })
        ));
    }
}
