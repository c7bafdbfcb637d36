//! JSON paths: the small subset of JSONPath that site profiles use to find cards and fields
//! in a mall's JSON (an inline `__NEXT_DATA__`, a captured fetch response, an API answer).
//!
//! Grammar: `$` then any number of steps — `.name`, `['name']` / `["name"]`, `[N]` (an
//! array index, negative from the end), `[*]` / `.*` (every element of an array or every
//! value of an object), `..name` (`name` at any depth) and filters `[?(@.path OP value)]`
//! (every element of an array, or value of an object, for which the relative path `@…`
//! selects a value equal (`==`) or not equal (`!=`) to a quoted string, a number, `true`,
//! `false` or `null`; `[?(@.path)]` alone: the path selects a truthy value). `$` alone is
//! the value itself.
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
    Filter(Filter),
}

/// `[?(@.path OP literal)]`, or `[?(@.path)]` (`test` = `None`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Filter {
    path: Vec<Step>,
    test: Option<(bool, Value)>,
}

impl Filter {
    fn parse(text: &str, inner: &str) -> Result<Self, String> {
        let body = inner.trim();
        let body = body
            .strip_prefix('(')
            .and_then(|b| b.strip_suffix(')'))
            .unwrap_or(body)
            .trim();
        let (left, test) = match body.find("==").or_else(|| body.find("!=")) {
            Some(at) => {
                let equal = &body[at..at + 2] == "==";
                let literal = body[at + 2..].trim();
                let value = literal_value(literal).ok_or_else(|| {
                    format!("{text:?}: {literal:?} is not a quoted string, a number, true, false or null")
                })?;
                (body[..at].trim(), Some((equal, value)))
            }
            None => (body, None),
        };
        if left.contains(['<', '>', '&', '|', '=', '!', ' ', '(']) {
            return Err(format!(
                "{text:?}: a filter is `@.path == value`, `@.path != value` or `@.path` (no other comparison, no `&&`/`||`)"
            ));
        }
        let rest = left
            .strip_prefix('@')
            .ok_or_else(|| format!("{text:?}: a filter's path starts with `@`"))?;
        let path = JsonPath::parse(&format!("${rest}"))?.steps;
        Ok(Self { path, test })
    }

    fn keeps(&self, value: &Value) -> bool {
        let selected = select_steps(&self.path, value);
        match &self.test {
            None => selected.iter().any(|v| truthy(v)),
            Some((equal, literal)) => {
                let same = selected.iter().any(|v| same_value(v, literal));
                same == *equal
            }
        }
    }
}

fn literal_value(text: &str) -> Option<Value> {
    if let Some(s) = text
        .strip_prefix('\'')
        .and_then(|s| s.strip_suffix('\''))
        .or_else(|| text.strip_prefix('"').and_then(|s| s.strip_suffix('"')))
    {
        return Some(Value::String(s.to_owned()));
    }
    match text {
        "true" => Some(Value::Bool(true)),
        "false" => Some(Value::Bool(false)),
        "null" => Some(Value::Null),
        _ => text.parse::<f64>().ok().map(|n| serde_json::json!(n)),
    }
}

/// Numbers compare by value (`3` equals `3.0`), everything else as JSON.
fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
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
                '[' if chars.get(i + 1) == Some(&'?') => {
                    // NB: a filter may hold `]` (`@.a[0]`) and quotes: it ends at `)]`, or at
                    // the last `]` of the path when written without parentheses.
                    let rest: String = chars[i..].iter().collect();
                    let end = rest
                        .find(")]")
                        .map(|p| p + 1)
                        .or_else(|| rest.rfind(']'))
                        .ok_or_else(|| format!("{}: `[?` without `]`", at(i)))?;
                    let inner: String = rest[2..end].to_owned();
                    steps.push(Step::Filter(Filter::parse(text, &inner)?));
                    i += rest[..=end].chars().count();
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
        select_steps(&self.steps, root)
    }

    /// The first value selected, if any (and not `null`).
    pub fn first<'a>(&self, root: &'a Value) -> Option<&'a Value> {
        self.select(root).into_iter().find(|v| !v.is_null())
    }

    /// What the path selects when it can only select objects or arrays, whatever the
    /// JSON (so a field reading it would read nothing): `$` alone (the item itself) or a
    /// path ending in a filter on a member (the elements the filter keeps). `None` when it
    /// may select a value.
    pub fn selects_containers(&self) -> Option<&'static str> {
        match self.steps.last() {
            None => Some("the item itself (an object)"),
            Some(Step::Filter(filter)) if !filter.path.is_empty() => {
                Some("the elements its filter keeps (objects)")
            }
            _ => None,
        }
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

/// Every value `steps` select in `root`, in document order.
fn select_steps<'a>(steps: &[Step], root: &'a Value) -> Vec<&'a Value> {
    let mut current = vec![root];
    for step in steps {
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
                Step::Filter(filter) => match value {
                    Value::Array(items) => next.extend(items.iter().filter(|v| filter.keeps(v))),
                    Value::Object(map) => next.extend(map.values().filter(|v| filter.keeps(v))),
                    _ => {}
                },
            }
        }
        current = next;
    }
    current
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

/// `value`'s JSON type in a reading error: `an object`, `an array`, `a string` ….
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
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
            ("$.items[1:3]", "neither an index"),
            ("$.items[0,1]", "neither an index"),
            ("$.items[(@.length-1)]", "neither an index"),
            ("$.items[?(@.price < 3)]", "no other comparison"),
            ("$.items[?(@.a && @.b)]", "no other comparison"),
            ("$.items[?(@.a || @.b == 1)]", "no other comparison"),
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

    #[test]
    fn filters_pick_elements_by_a_field() {
        let v = json!({"delivery": [
            {"type": "free_over", "amount": 20000},
            {"type": "fee", "amount": 3000, "tags": ["a]b"]},
            {"type": "fee", "amount": 0, "kind": 2},
        ]});
        assert_eq!(
            sel("$.delivery[?(@.type=='fee')].amount", &v),
            vec![json!(3000), json!(0)]
        );
        assert_eq!(
            sel("$.delivery[?(@.type == \"free_over\")].amount", &v),
            vec![json!(20000)]
        );
        assert_eq!(
            sel("$.delivery[?(@.type != 'fee')].amount", &v),
            vec![json!(20000)]
        );
        assert_eq!(
            sel("$.delivery[?(@.amount == 3000)].type", &v),
            vec![json!("fee")]
        );
        assert_eq!(
            sel("$.delivery[?(@.kind == 2.0)].amount", &v),
            vec![json!(0)]
        );
        assert_eq!(
            sel("$.delivery[?(@.amount)].amount", &v),
            vec![json!(20000), json!(3000)]
        );
        assert_eq!(
            sel("$.delivery[?(@.tags[0] == 'a]b')].amount", &v),
            vec![json!(3000)]
        );
        assert!(sel("$.delivery[?(@.type == 'none')]", &v).is_empty());
        for (path, says) in [
            ("$.d[?(type == 'x')]", "starts with `@`"),
            ("$.d[?(@.type == x)]", "is not a quoted string"),
            ("$.d[?(@.type == 'x'", "without `]`"),
        ] {
            let err = JsonPath::parse(path).unwrap_err();
            assert!(err.contains(says), "{path}: {err}");
        }
    }
}
