//! The chart asks only for what the services export. Every `lps_*` series that a panel of
//! the Grafana dashboard (`helm/lps/dashboards/lps.json`) or a rule of the PrometheusRule
//! (`helm/lps/templates/prometheusrule.yaml`) names must exist, with every label the query
//! selects on or aggregates by, in what a real coordinator serves at `/metrics` and what a
//! node's `NodeMetrics` encode — as they are before the first event, once the malls are
//! known (a series born at its first event has no `increase`, and a panel over it reads
//! "No data"). And no exported label may be one that Prometheus itself attaches to every
//! scraped series (`namespace`, `pod`, `service`, …): a clash would be renamed
//! `exported_<label>` and the query would silently match nothing.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
    time::Duration,
};

use lps_coordinator::queue::EnqueueContext;
use lps_crawler_node::NodeMetrics;
use lps_proto::model::{MallId, Priority, ProductSpec, SearchRequest};
use lps_telemetry::exposition::Format;
use sqlx::PgPool;

mod common;

const MALL: &str = "testmall-alpha";

/// Labels the Prometheus Operator's ServiceMonitor (and Prometheus) put on every target.
const TARGET_LABELS: [&str; 7] = [
    "namespace",
    "service",
    "pod",
    "container",
    "endpoint",
    "job",
    "instance",
];

/// Series exported: metric name → label name → values seen.
type Exported = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

/// The sample lines of a Prometheus text exposition.
fn parse_exposition(text: &str, into: &mut Exported) {
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (name, rest) = match line.find(['{', ' ']) {
            Some(i) => line.split_at(i),
            None => panic!("not a sample line: {line:?}"),
        };
        let labels = into.entry(name.to_owned()).or_default();
        if let Some(body) = rest.strip_prefix('{') {
            let body = &body[..body.rfind('}').expect("unclosed label set")];
            // NB: values of exported series are plain ids here; a quoted `}` is not.
            for (label, value) in label_pairs(body) {
                labels.entry(label).or_default().insert(value);
            }
        }
    }
}

/// `a="x",b=~"y"` → `[(a, x), (b, y)]` (the operator is dropped; `\"` and `\\` unescaped).
fn label_pairs(body: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = body.trim();
    while !rest.is_empty() {
        let op_at = rest
            .find(['=', '!'])
            .unwrap_or_else(|| panic!("no operator in {rest:?}"));
        let label = rest[..op_at].trim().to_owned();
        let after_op = rest[op_at..]
            .trim_start_matches(['=', '!', '~'])
            .trim_start();
        let quoted = after_op
            .strip_prefix('"')
            .unwrap_or_else(|| panic!("unquoted value in {body:?}"));
        let end = closing_quote(quoted).unwrap_or_else(|| panic!("unterminated value in {body:?}"));
        let value = quoted[..end].replace("\\\"", "\"").replace("\\\\", "\\");
        out.push((label, value));
        rest = quoted[end + 1..]
            .trim_start()
            .trim_start_matches(',')
            .trim();
    }
    out
}

/// The byte offset of the `"` that ends a quoted string (`text` starts after the opening
/// one), skipping escaped quotes.
fn closing_quote(text: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        match c {
            '\\' if !escaped => escaped = true,
            '"' if !escaped => return Some(i),
            _ => escaped = false,
        }
    }
    None
}

/// The byte offset of the `}` that closes the selector starting at `text[0] == '{'`,
/// outside quoted values (which may hold `{{ … }}` template code).
fn closing_brace(text: &str) -> Option<usize> {
    let mut i = 1;
    while i < text.len() {
        match text.as_bytes()[i] {
            b'"' => i += 1 + closing_quote(&text[i + 1..])?,
            b'}' => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

/// What one query asks of one metric.
#[derive(Debug)]
struct Wanted {
    metric: String,
    /// Labels it selects on, with the value when it is a literal equality.
    selected: Vec<(String, Option<String>)>,
    /// Labels it is aggregated by (or without).
    grouped: Vec<String>,
}

/// The `lps_*` series `expr` reads, each with the labels it selects on and those of every
/// `by (…)` / `without (…)` whose argument contains it.
fn wanted(expr: &str) -> Vec<Wanted> {
    assert!(
        !expr.contains(") by (") && !expr.contains(") without ("),
        "write the grouping before the argument (`sum by (x) (…)`), as everywhere else: {expr}"
    );
    // Groupings: (labels, byte range of their argument).
    let mut groupings = Vec::new();
    for keyword in ["by (", "by(", "without (", "without("] {
        let mut from = 0;
        while let Some(at) = expr[from..].find(keyword).map(|i| i + from) {
            from = at + keyword.len();
            let close = from + expr[from..].find(')').expect("unclosed grouping");
            let labels: Vec<String> = expr[from..close]
                .split(',')
                .map(|l| l.trim().to_owned())
                .filter(|l| !l.is_empty())
                .collect();
            let open = close
                + 1
                + expr[close + 1..]
                    .find('(')
                    .unwrap_or_else(|| panic!("no argument after the grouping in {expr}"));
            let mut depth = 0;
            let mut end = expr.len();
            for (i, c) in expr[open..].char_indices() {
                match c {
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            end = open + i;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            groupings.push((labels, open..end));
        }
    }
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = expr[from..].find("lps_").map(|i| i + from) {
        let name_end = expr[at..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(expr.len(), |i| i + at);
        let metric = expr[at..name_end].to_owned();
        let mut selected = Vec::new();
        from = name_end;
        if expr[name_end..].starts_with('{') {
            let close = name_end
                + closing_brace(&expr[name_end..])
                    .unwrap_or_else(|| panic!("unclosed selector in {expr}"));
            for (label, value) in label_pairs(&expr[name_end + 1..close]) {
                // A literal equality names a value; `{{ … }}` and `$var` are filled in later.
                let literal = !value.contains('$') && !value.contains("{{");
                let exact = expr[name_end..close].contains(&format!("{label}=\""))
                    && !expr[name_end..close].contains(&format!("{label}=~\""));
                selected.push((label, (literal && exact).then_some(value)));
            }
            from = close;
        }
        let grouped = groupings
            .iter()
            .filter(|(_, range)| range.contains(&at))
            .flat_map(|(labels, _)| labels.clone())
            .collect();
        out.push(Wanted {
            metric,
            selected,
            grouped,
        });
    }
    out
}

/// Every `expr` of the dashboard, with the panel title it belongs to.
fn dashboard_exprs() -> Vec<(String, String)> {
    fn walk(value: &serde_json::Value, title: &str, out: &mut Vec<(String, String)>) {
        match value {
            serde_json::Value::Object(map) => {
                let title = map
                    .get("title")
                    .and_then(|t| t.as_str())
                    .unwrap_or(title)
                    .to_owned();
                if let Some(expr) = map.get("expr").and_then(|e| e.as_str()) {
                    out.push((format!("panel {title:?}"), expr.to_owned()));
                }
                for v in map.values() {
                    walk(v, &title, out);
                }
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| walk(v, title, out)),
            _ => {}
        }
    }
    let path = repo().join("helm/lps/dashboards/lps.json");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut out = Vec::new();
    walk(&json, "", &mut out);
    out
}

/// Every `expr:` of the PrometheusRule template (one line, or a `>-` block), with its alert.
fn rule_exprs() -> Vec<(String, String)> {
    let text =
        std::fs::read_to_string(repo().join("helm/lps/templates/prometheusrule.yaml")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut alert = String::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        if let Some(name) = trimmed.strip_prefix("- alert:") {
            alert = name.trim().to_owned();
        }
        let Some(expr) = trimmed.strip_prefix("expr:") else {
            continue;
        };
        let expr = expr.trim();
        let expr = if expr.starts_with(">-") || expr.starts_with('|') {
            let indent = line.len() - trimmed.len();
            lines[i + 1..]
                .iter()
                .take_while(|l| l.len() - l.trim_start().len() > indent)
                .map(|l| l.trim())
                .collect::<Vec<_>>()
                .join(" ")
        } else {
            expr.to_owned()
        };
        out.push((format!("rule {alert}"), expr));
    }
    out
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

/// What `queries` ask that `exported` lacks, one line each.
fn missing(queries: &[(String, String)], exported: &Exported) -> Vec<String> {
    let mut out = Vec::new();
    for (whose, expr) in queries {
        for w in wanted(expr) {
            let Some(labels) = exported.get(&w.metric) else {
                out.push(format!("{whose}: no series {}", w.metric));
                continue;
            };
            for (label, value) in &w.selected {
                if TARGET_LABELS.contains(&label.as_str()) {
                    // Its value is the deployment's (a Service's name, a pod's), not ours.
                    if let Some(value) = value {
                        out.push(format!(
                            "{whose}: {} selects {label}={value:?}, a label Prometheus sets \
                             on targets (a fixed value matches no deployment)",
                            w.metric
                        ));
                    }
                    continue;
                }
                match (labels.get(label), value) {
                    (None, _) => out.push(format!("{whose}: {} has no label {label}", w.metric)),
                    (Some(values), Some(value)) if !values.contains(value) => out.push(format!(
                        "{whose}: {}{{{label}={value:?}}} matches nothing (values: {values:?})",
                        w.metric
                    )),
                    _ => {}
                }
            }
            for label in &w.grouped {
                if !TARGET_LABELS.contains(&label.as_str()) && !labels.contains_key(label) {
                    out.push(format!(
                        "{whose}: {} is grouped by {label}, a label it lacks",
                        w.metric
                    ));
                }
            }
        }
    }
    out
}

#[test]
fn the_query_reader_finds_metrics_selectors_and_groupings() {
    let w = wanted(
        r#"histogram_quantile(0.95, sum by (le, mall) (rate(lps_a_bucket{namespace=~"$ns",outcome="found"}[5m]))) / max(lps_b)"#,
    );
    assert_eq!(w.len(), 2, "{w:?}");
    assert_eq!(w[0].metric, "lps_a_bucket");
    assert_eq!(w[0].grouped, ["le", "mall"]);
    assert_eq!(
        w[0].selected,
        [
            ("namespace".to_owned(), None),
            ("outcome".to_owned(), Some("found".to_owned()))
        ]
    );
    assert_eq!(w[1].metric, "lps_b");
    assert!(w[1].grouped.is_empty() && w[1].selected.is_empty());
    // A query the checks must refuse.
    let mut exported = Exported::new();
    parse_exposition(
        "# TYPE lps_a_bucket counter\nlps_a_bucket{le=\"1\",outcome=\"found\"} 0\nlps_b 1\n",
        &mut exported,
    );
    let queries = [(
        "panel x".to_owned(),
        r#"sum by (mall) (lps_a_bucket{outcome="lost"}) + lps_c"#.to_owned(),
    )];
    let said = missing(&queries, &exported);
    assert_eq!(said.len(), 3, "{said:?}");
    assert!(said[0].contains("matches nothing"), "{said:?}");
    assert!(said[1].contains("grouped by mall"), "{said:?}");
    assert!(said[2].contains("no series lps_c"), "{said:?}");
    // A template value on a target label is the deployment's; a fixed one is a mistake.
    let queries = [(
        "rule y".to_owned(),
        r#"absent(lps_b{namespace="{{ $ns }}"}) or absent(lps_b{service="coordinator"})"#
            .to_owned(),
    )];
    let said = missing(&queries, &exported);
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].contains("selects service=\"coordinator\""),
        "{said:?}"
    );
}

#[test]
fn the_chart_has_queries_to_check() {
    let dashboard = dashboard_exprs();
    let rules = rule_exprs();
    assert!(dashboard.len() >= 30, "{dashboard:?}");
    assert!(rules.len() >= 10, "{rules:?}");
    assert!(
        rules
            .iter()
            .any(|(_, e)| e.contains("lps_mall_proxy_ports_available_ratio")),
        "the multi-line rule was read: {rules:?}"
    );
}

#[sqlx::test(migrator = "lps_coordinator::db::MIGRATOR")]
async fn every_query_of_the_dashboard_and_the_rules_matches_exported_series(pool: PgPool) {
    let running =
        common::start_with_mall(&pool, MALL, &["--malls", MALL, "--alert-interval", "200ms"]).await;
    for sql in [
        "insert into proxy_port (host, port) select 'gw', g from generate_series(10001, 10004) g",
        "insert into proxy_port_cooldown (host, port, mall, cooldown_until)
           values ('gw', 10001, 'testmall-alpha', now() + interval '10 minutes')",
    ] {
        sqlx::query(sql).execute(&pool).await.unwrap();
    }
    let request = SearchRequest::new(
        vec![ProductSpec::new(None, "dashboard probe").unwrap()],
        vec![MallId::new(MALL).unwrap()],
        Priority::BATCH,
        None,
        None,
    )
    .unwrap();
    running
        .queue
        .enqueue(&request, &EnqueueContext::default())
        .await
        .unwrap();

    let node = NodeMetrics::new();
    node.init_malls([MALL]);
    let queries: Vec<(String, String)> =
        dashboard_exprs().into_iter().chain(rule_exprs()).collect();

    // The coordinator's gauges follow its ops snapshot: wait for one that has the port.
    let client = reqwest::Client::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let (exported, coordinator_text) = loop {
        let text = client
            .get(format!("http://{}/metrics", running.http_addr))
            .header("accept", "text/plain;version=0.0.4")
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let mut exported = Exported::new();
        parse_exposition(&text, &mut exported);
        parse_exposition(&node.encode_as(Format::Text), &mut exported);
        let ready = text.contains("lps_mall_proxy_ports_cooling{mall=\"testmall-alpha\"} 1")
            && text.contains("lps_jobs{state=\"queued\"} 1");
        if (ready && missing(&queries, &exported).is_empty())
            || tokio::time::Instant::now() > deadline
        {
            break (exported, text);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let said = missing(&queries, &exported);
    assert!(
        said.is_empty(),
        "queries over series nobody exports:\n{}\n\ncoordinator /metrics:\n{coordinator_text}",
        said.join("\n")
    );

    let clashes: Vec<String> = exported
        .iter()
        .flat_map(|(metric, labels)| {
            labels
                .keys()
                .filter(|l| TARGET_LABELS.contains(&l.as_str()))
                .map(move |l| format!("{metric} exports {l}, which Prometheus sets on targets"))
        })
        .collect();
    assert!(clashes.is_empty(), "{clashes:?}");
    // The node's metrics are in the set: the check covered both services.
    assert!(exported.contains_key("lps_node_blocks_total"));
    assert!(exported.contains_key("lps_pickup_latency_seconds_bucket"));
    running.shutdown().await;
}
