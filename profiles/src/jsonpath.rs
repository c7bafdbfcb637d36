//! JSON paths: the small subset of JSONPath that site profiles use to find cards and fields
//! in a mall's JSON (an inline `__NEXT_DATA__`, a captured fetch response, an API answer).
//!
//! Grammar: `$` then any number of steps — `.name`, `['name']` / `["name"]`, `[N]` (an
//! array index, negative from the end), `[*]` / `.*` (every element of an array or every
//! value of an object) and `..name` (`name` at any depth). `$` alone is the value itself.
//! A path is parsed once (when the profile is loaded) and can be evaluated on any value
//! without panicking: a step that does not fit the value selects nothing.

use std::fmt;

use serde_json::Value;

/// A parsed JSON path (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonPath {
    text: String,
    steps: Vec<Step>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(i64),
    Wildcard,
    Descend(String),
}

impl JsonPath {
    /// Parses `text`; the error says what is wrong and where.
    pub fn parse(text: &str) -> Result<Self, String> {
        let chars: Vec<char> = text.trim().chars().collect();
        if chars.first() != Some(&'$') {
            return Err(format!("{text:?}: a JSON path starts with `$`"));
        }
        let mut steps = Vec::new();
        let mut i = 1;
        let at = |i: usize| format!("{text:?} at character {}", i + 1);
        while i < chars.len() {
            match chars[i] {
                '.' if chars.get(i + 1) == Some(&'.') => {
                    let (name, next) = read_name(&chars, i + 2);
                    if name.is_empty() {
                        return Err(format!("{}: `..` needs a name", at(i)));
                    }
                    steps.push(Step::Descend(name));
                    i = next;
                }
                '.' if chars.get(i + 1) == Some(&'*') => {
                    steps.push(Step::Wildcard);
                    i += 2;
                }
                '.' => {
                    let (name, next) = read_name(&chars, i + 1);
                    if name.is_empty() {
                        return Err(format!("{}: `.` needs a name", at(i)));
                    }
                    steps.push(Step::Key(name));
                    i = next;
                }
                '[' => {
                    let close = chars[i..]
                        .iter()
                        .position(|&c| c == ']')
                        .map(|p| i + p)
                        .ok_or_else(|| format!("{}: `[` without `]`", at(i)))?;
                    let inner: String = chars[i + 1..close].iter().collect();
                    let inner = inner.trim();
                    let step = if inner == "*" {
                        Step::Wildcard
                    } else if let Some(quoted) = inner
                        .strip_prefix('\'')
                        .and_then(|s| s.strip_suffix('\''))
                        .or_else(|| inner.strip_prefix('"').and_then(|s| s.strip_suffix('"')))
                    {
                        Step::Key(quoted.to_owned())
                    } else {
                        Step::Index(inner.parse().map_err(|_| {
                            format!(
                                "{}: `[{inner}]` is neither an index, `*` nor a quoted name",
                                at(i)
                            )
                        })?)
                    };
                    steps.push(step);
                    i = close + 1;
                }
                c => return Err(format!("{}: unexpected {c:?}", at(i))),
            }
        }
        Ok(Self {
            text: text.trim().to_owned(),
            steps,
        })
    }

    /// Every value the path selects in `root`, in document order.
    pub fn select<'a>(&self, root: &'a Value) -> Vec<&'a Value> {
        let mut current = vec![root];
        for step in &self.steps {
            let mut next = Vec::new();
            for value in current {
                match step {
                    Step::Key(key) => next.extend(value.get(key.as_str())),
                    Step::Index(index) => {
                        if let Value::Array(items) = value {
                            let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
                            let at = if *index < 0 { len + index } else { *index };
                            next.extend(usize::try_from(at).ok().and_then(|at| items.get(at)));
                        }
                    }
                    Step::Wildcard => match value {
                        Value::Array(items) => next.extend(items.iter()),
                        Value::Object(map) => next.extend(map.values()),
                        _ => {}
                    },
                    Step::Descend(key) => descend(value, key, &mut next),
                }
            }
            current = next;
        }
        current
    }

    /// The first value selected, if any (and not `null`).
    pub fn first<'a>(&self, root: &'a Value) -> Option<&'a Value> {
        self.select(root).into_iter().find(|v| !v.is_null())
    }

    /// The path as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for JsonPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::str::FromStr for JsonPath {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Self::parse(s)
    }
}

fn read_name(chars: &[char], from: usize) -> (String, usize) {
    let mut end = from;
    while end < chars.len() && !matches!(chars[end], '.' | '[') {
        end += 1;
    }
    (chars[from..end].iter().collect(), end)
}

fn descend<'a>(value: &'a Value, key: &str, out: &mut Vec<&'a Value>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                if k == key {
                    out.push(v);
                }
                descend(v, key, out);
            }
        }
        Value::Array(items) => {
            for v in items {
                descend(v, key, out);
            }
        }
        _ => {}
    }
}

/// A JSON value as the text a field rule reads: strings as they are, numbers and booleans
/// written out, `null`, arrays and objects as nothing.
pub fn value_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Null | Value::Array(_) | Value::Object(_) => None,
    }
}

/// Whether a value counts as "set": present and not `false`, `0`, `""`, `[]` or `null`.
pub fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.trim().is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn sel(path: &str, v: &Value) -> Vec<Value> {
        JsonPath::parse(path)
            .unwrap()
            .select(v)
            .into_iter()
            .cloned()
            .collect()
    }

    #[test]
    fn steps() {
        let v = json!({
            "props": {"pageProps": {"list": [
                {"item": {"title": "a", "price": 100}},
                {"item": {"title": "b", "price": "2,000"}},
            ]}},
            "odd key": {"x": 1},
        });
        assert_eq!(sel("$", &v), vec![v.clone()]);
        assert_eq!(
            sel("$.props.pageProps.list[*].item.title", &v),
            vec![json!("a"), json!("b")]
        );
        assert_eq!(
            sel("$.props.pageProps.list[1].item.price", &v),
            vec![json!("2,000")]
        );
        assert_eq!(
            sel("$.props.pageProps.list[-1].item.title", &v),
            vec![json!("b")]
        );
        assert_eq!(sel("$['odd key'].x", &v), vec![json!(1)]);
        assert_eq!(sel("$[\"odd key\"][\"x\"]", &v), vec![json!(1)]);
        assert_eq!(sel("$..title", &v), vec![json!("a"), json!("b")]);
        assert_eq!(sel("$.props.*.list[0].item.price", &v), vec![json!(100)]);
        // Steps that do not fit select nothing.
        assert!(sel("$.props.pageProps.list.title", &v).is_empty());
        assert!(sel("$.props.pageProps.list[9]", &v).is_empty());
        assert!(sel("$.nope[*]", &v).is_empty());
    }

    #[test]
    fn bad_paths_say_where() {
        for (path, says) in [
            ("props.x", "starts with `$`"),
            ("$.", "needs a name"),
            ("$..", "needs a name"),
            ("$[", "without `]`"),
            ("$[x]", "neither an index"),
            ("$a", "unexpected"),
        ] {
            let err = JsonPath::parse(path).unwrap_err();
            assert!(err.contains(says), "{path}: {err}");
        }
    }

    #[test]
    fn texts_and_truth() {
        assert_eq!(value_text(&json!("x")), Some("x".into()));
        assert_eq!(value_text(&json!(12900)), Some("12900".into()));
        assert_eq!(value_text(&json!(null)), None);
        assert!(truthy(&json!(true)) && truthy(&json!("ad")) && truthy(&json!(1)));
        assert!(!truthy(&json!(false)) && !truthy(&json!("")) && !truthy(&json!(0)));
        assert!(!truthy(&json!(null)) && !truthy(&json!([])));
    }
}
