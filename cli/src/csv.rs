//! CSV for spreadsheets: the products file `lpsctl search --file` reads, and the rows
//! `--csv` writes for a search's results and a product's price history.
//!
//! Reading (RFC 4180 with the usual leniencies): UTF-8 with or without a byte-order mark,
//! fields quoted with `"` (a quote inside doubled, commas and line breaks allowed inside),
//! CRLF or LF line ends, blank lines skipped. Columns are `name`, `code`, `brand`,
//! `model_code` and `gtin` (all but `name` optional), in that order; a first row with a
//! field `name` is a header, and
//! then its names say which column is which (in any order) and other columns are ignored,
//! so the rows `--csv` writes for a search read back in as its products. Every row is validated as
//! the coordinator would validate it, and the first bad one is an error naming the file,
//! the line and the column (`products.csv line 7: name must not be empty`), so a bad file
//! sends nothing. A line break or tab inside a quoted cell reads as a space (a wrapped
//! cell names one product).
//!
//! `brand`, `model_code` and `gtin` are the caller hints of `lps.v1.Product` (validated
//! as the coordinator validates them: a GTIN's length and check digit, a hint's length and
//! characters). The brand column is older than the hints: it is still put in front of the
//! name unless the name already contains it (case-insensitively), as files written before
//! the hints expect — so a product without a code keeps its name, and its identity and
//! price history — and it is sent as the brand hint as well.
//!
//! Writing: a header row, then one row per record, every field quoted where it must be
//! (commas, quotes, line breaks), CRLF line ends, UTF-8 — without a byte-order mark unless
//! asked for (`--bom`: Excel then reads Hangul right when it opens the file directly).
//! Text a mall wrote (titles, sellers, URLs) that starts like a spreadsheet formula (`=`,
//! `+`, `-`, `@`, tab, CR) gets a leading `'`, so opening the file never runs a formula a
//! mall planted; product names and codes, which the caller gave, are written as given, so
//! they read back in unchanged.

use std::fmt;

use lps_proto::{
    model::{MAX_PRODUCTS_PER_SEARCH, ProductSpec, ShippingStatus},
    pb,
};

use super::{
    disposition, effective_price, error_class, job_state, mall_offer, outcome, shipping, timestamp,
};

/// The UTF-8 byte-order mark, as `--bom` writes it and as the reader skips it.
pub const BOM: &str = "\u{feff}";

/// Why a products file cannot be used: the file, the line when one is to blame, and what
/// is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileError {
    pub file: String,
    pub line: Option<u64>,
    pub message: String,
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{} line {line}: {}", self.file, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for FileError {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Column {
    Name,
    Code,
    Brand,
    ModelCode,
    Gtin,
}

impl Column {
    const IN_ORDER: [Self; 5] = [
        Self::Name,
        Self::Code,
        Self::Brand,
        Self::ModelCode,
        Self::Gtin,
    ];

    fn as_str(self) -> &'static str {
        match self {
            Self::Name => "name",
            Self::Code => "code",
            Self::Brand => "brand",
            Self::ModelCode => "model_code",
            Self::Gtin => "gtin",
        }
    }

    fn from_header(s: &str) -> Option<Self> {
        Self::IN_ORDER
            .into_iter()
            .find(|c| c.as_str().eq_ignore_ascii_case(s.trim()))
    }
}

/// The products of the file `file` (its name, for messages) with contents `bytes`, in file
/// order, each validated as the coordinator validates a product.
pub fn read_products(file: &str, bytes: &[u8]) -> Result<Vec<pb::Product>, FileError> {
    let error = |line: Option<u64>, message: String| FileError {
        file: file.to_owned(),
        line,
        message,
    };
    let bytes = bytes.strip_prefix(BOM.as_bytes()).unwrap_or(bytes);
    let mut reader = ::csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(bytes);
    let mut columns: Vec<Option<Column>> = Column::IN_ORDER.map(Some).to_vec();
    let mut headed = false;
    let mut products = Vec::new();
    let mut first = true;
    for record in reader.byte_records() {
        let record = record.map_err(|e| {
            let line = e.position().map(|p| p.line());
            error(line, format!("not CSV: {e}"))
        })?;
        let line = record.position().map(|p| p.line());
        let mut fields = Vec::with_capacity(record.len());
        for (i, raw) in record.iter().enumerate() {
            let text = std::str::from_utf8(raw).map_err(|_| {
                let column = columns
                    .get(i)
                    .copied()
                    .flatten()
                    .map_or("a column", Column::as_str);
                error(
                    line,
                    format!("{column} is not UTF-8 (save the file as CSV UTF-8)"),
                )
            })?;
            fields.push(text);
        }
        if std::mem::take(&mut first)
            && fields
                .iter()
                .any(|f| Column::from_header(f) == Some(Column::Name))
        {
            columns = header(&fields).map_err(|m| error(line, m))?;
            headed = true;
            continue;
        }
        if fields.len() > columns.len() {
            let expected = if headed {
                format!("the header has {}", columns.len())
            } else {
                format!(
                    "expected at most {} ({})",
                    columns.len(),
                    Column::IN_ORDER.map(Column::as_str).join(", ")
                )
            };
            return Err(error(line, format!("{} columns; {expected}", fields.len())));
        }
        let get = |column: Column| {
            columns
                .iter()
                .position(|&c| c == Some(column))
                .and_then(|i| fields.get(i).copied())
                .unwrap_or("")
        };
        let (name, code, brand) = (get(Column::Name), get(Column::Code), get(Column::Brand));
        let product = pb::Product {
            code: code.to_owned(),
            name: with_brand(name, brand),
            brand: one_line(brand),
            model_code: one_line(get(Column::ModelCode)),
            gtin: get(Column::Gtin).to_owned(),
        };
        let spec = ProductSpec::try_from(&product)
            .map_err(|e| error(line, format!("{} {}", e.field, e.reason)))?;
        products.push(pb::Product::from(&spec));
    }
    if products.is_empty() {
        return Err(error(None, "no products in it".to_owned()));
    }
    if products.len() > MAX_PRODUCTS_PER_SEARCH {
        return Err(error(
            None,
            format!(
                "{} products; one search takes at most {MAX_PRODUCTS_PER_SEARCH} (split the file)",
                products.len()
            ),
        ));
    }
    Ok(products)
}

/// The columns a header row names (`None`: a column LPS does not read); none twice.
fn header(fields: &[&str]) -> Result<Vec<Option<Column>>, String> {
    let mut columns = Vec::with_capacity(fields.len());
    for field in fields {
        let column = Column::from_header(field);
        if let Some(c) = column
            && columns.contains(&column)
        {
            return Err(format!("column {} twice in the header", c.as_str()));
        }
        columns.push(column);
    }
    Ok(columns)
}

/// A cell's text with line breaks and tabs as spaces: a spreadsheet cell wrapped over two
/// lines names one product (and a product name holds no control characters).
fn one_line(s: &str) -> String {
    s.replace("\r\n", " ").replace(['\r', '\n', '\t'], " ")
}

/// `name` with the brand hint in front, unless the name names the brand already.
fn with_brand(name: &str, brand: &str) -> String {
    let (name, brand) = (one_line(name), one_line(brand));
    let (name, brand) = (name.trim(), brand.trim());
    if brand.is_empty() || name.to_lowercase().contains(&brand.to_lowercase()) {
        name.to_owned()
    } else if name.is_empty() {
        // Left empty, so the name's own error says what is missing.
        String::new()
    } else {
        format!("{brand} {name}")
    }
}

/// Mall-written text as a cell: a leading `'` when it would start a formula.
fn untrusted(s: &str) -> String {
    if s.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{s}")
    } else {
        s.to_owned()
    }
}

fn write(header: &[&str], rows: Vec<Vec<String>>, bom: bool) -> String {
    let mut writer = ::csv::WriterBuilder::new()
        .terminator(::csv::Terminator::CRLF)
        .from_writer(Vec::new());
    // NB: writing into a Vec cannot fail, and every row has the header's length.
    let _ = writer.write_record(header);
    for row in rows {
        let _ = writer.write_record(&row);
    }
    let body = writer.into_inner().unwrap_or_default();
    let mut out = if bom { BOM.to_owned() } else { String::new() };
    out.push_str(&String::from_utf8_lossy(&body));
    out
}

/// Price cells: price, shipping, shipping fee, effective price, currency. With unknown
/// shipping the fee and effective price are left empty (the effective price is not known).
fn price_cells(
    price: i64,
    status: ShippingStatus,
    fee: i64,
    effective: i64,
    currency: &str,
) -> [String; 5] {
    let known = status != ShippingStatus::Unknown;
    [
        price.to_string(),
        status.as_str().to_owned(),
        if known {
            fee.to_string()
        } else {
            String::new()
        },
        if known {
            effective.to_string()
        } else {
            String::new()
        },
        currency.to_owned(),
    ]
}

// NB: the hint columns come last, so readers of the older columns by position still work.
pub const ACCEPTED_HEADER: [&str; 10] = [
    "search_id",
    "product_index",
    "name",
    "code",
    "mall",
    "disposition",
    "job_id",
    "brand",
    "model_code",
    "gtin",
];

/// The hint cells of a product: brand, model code, GTIN.
fn hint_cells(p: Option<&pb::Product>) -> [String; 3] {
    p.map_or_else(Default::default, |p| {
        [p.brand.clone(), p.model_code.clone(), p.gtin.clone()]
    })
}

/// An accepted search (`search` without `--wait`): one row per product and mall with the
/// job that answers it; `products` are the request's, in its order.
pub fn search_response(r: &pb::SearchResponse, products: &[pb::Product], bom: bool) -> String {
    let rows = r
        .items
        .iter()
        .map(|i| {
            let p = usize::try_from(i.product_index)
                .ok()
                .and_then(|n| products.get(n));
            let mut row = vec![
                r.search_id.to_string(),
                i.product_index.to_string(),
                p.map(|p| p.name.clone()).unwrap_or_default(),
                p.map(|p| p.code.clone()).unwrap_or_default(),
                i.mall.clone(),
                disposition(i.disposition),
                i.job_id.to_string(),
            ];
            row.extend(hint_cells(p));
            row
        })
        .collect();
    write(&ACCEPTED_HEADER, rows, bom)
}

pub const SEARCH_HEADER: [&str; 23] = [
    "search_id",
    "product_index",
    "name",
    "code",
    "mall",
    "state",
    "outcome",
    "price",
    "shipping",
    "shipping_fee",
    "effective_price",
    "currency",
    "lowest",
    "title",
    "url",
    "seller",
    "disposition",
    "job_id",
    "error_class",
    "error",
    "brand",
    "model_code",
    "gtin",
];

/// A search's results: one row per product and mall, with the mall's offer (its lowest
/// with known shipping; none when it found nothing); `lowest` is `true` on the row of the
/// product's lowest offer.
pub fn search_status(s: &pb::SearchStatus, bom: bool) -> String {
    let mut rows = Vec::new();
    for (index, p) in s.products.iter().enumerate() {
        let (name, code) = p
            .product
            .as_ref()
            .map_or((String::new(), String::new()), |p| {
                (p.name.clone(), p.code.clone())
            });
        for m in &p.malls {
            let offer = mall_offer(m);
            let lowest = match (offer, &p.lowest) {
                (Some(o), Some(l)) => {
                    o.mall == l.mall
                        && o.url == l.url
                        && effective_price(o).is_some()
                        && effective_price(o) == effective_price(l)
                }
                _ => false,
            };
            let prices = offer.map_or_else(Default::default, |o| {
                price_cells(
                    o.price,
                    shipping(o),
                    o.shipping_fee,
                    effective_price(o).unwrap_or_default(),
                    &o.currency,
                )
            });
            let mut row = vec![
                s.search_id.to_string(),
                index.to_string(),
                name.clone(),
                code.clone(),
                m.mall.clone(),
                job_state(m.state),
                outcome(m.outcome),
            ];
            row.extend(prices);
            row.extend([
                lowest.to_string(),
                offer.map(|o| untrusted(&o.title)).unwrap_or_default(),
                offer.map(|o| untrusted(&o.url)).unwrap_or_default(),
                offer.map(|o| untrusted(&o.seller)).unwrap_or_default(),
                disposition(m.disposition),
                m.job_id.to_string(),
                error_class(m.error_class),
                m.error.clone(),
            ]);
            row.extend(hint_cells(p.product.as_ref()));
            rows.push(row);
        }
    }
    write(&SEARCH_HEADER, rows, bom)
}

pub const HISTORY_HEADER: [&str; 19] = [
    "observed_at",
    "name",
    "code",
    "search_id",
    "complete",
    "mall",
    "lowest",
    "price",
    "shipping",
    "shipping_fee",
    "effective_price",
    "currency",
    "title",
    "url",
    "mall_observed_at",
    "cached",
    "covered_malls",
    "client",
    "schedule_id",
];

/// A product's price history: one row per entry and mall that found it, newest entry
/// first; `lowest` marks the entry's lowest mall. `name` and `code` are what the entry's
/// search asked for (a client may have renamed the product since), else the product asked
/// about here; `client` and `schedule_id` come last, so readers of the older columns by
/// position still work.
pub fn price_history(h: &pb::PriceHistory, bom: bool) -> String {
    let (name, code) = h
        .product
        .as_ref()
        .map_or((String::new(), String::new()), |p| {
            (p.name.clone(), p.code.clone())
        });
    let mut rows = Vec::new();
    for e in &h.entries {
        for m in &e.malls {
            let status = ShippingStatus::from_pb(m.shipping, m.shipping_fee);
            let currency = if m.currency.is_empty() {
                &e.currency
            } else {
                &m.currency
            };
            let (name, code) = e
                .product
                .as_ref()
                .map_or((name.clone(), code.clone()), |p| {
                    (p.name.clone(), p.code.clone())
                });
            let mut row = vec![
                timestamp(e.observed_at.as_ref().or(e.at.as_ref())).unwrap_or_default(),
                name,
                code,
                if e.search_id > 0 {
                    e.search_id.to_string()
                } else {
                    String::new()
                },
                e.complete.to_string(),
                m.mall.clone(),
                (m.mall == e.lowest_mall && m.effective_price == e.lowest_effective_price)
                    .to_string(),
            ];
            row.extend(price_cells(
                m.price,
                status,
                m.shipping_fee,
                m.effective_price,
                currency,
            ));
            row.extend([
                untrusted(&m.title),
                untrusted(&m.url),
                timestamp(m.observed_at.as_ref()).unwrap_or_default(),
                m.cached.to_string(),
                e.covered_malls.join(" "),
                e.client.clone(),
                if e.schedule_id > 0 {
                    e.schedule_id.to_string()
                } else {
                    String::new()
                },
            ]);
            rows.push(row);
        }
    }
    write(&HISTORY_HEADER, rows, bom)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(products: &[pb::Product]) -> Vec<(&str, &str)> {
        products
            .iter()
            .map(|p| (p.name.as_str(), p.code.as_str()))
            .collect()
    }

    #[test]
    fn reads_quoted_fields_a_bom_and_a_header_in_any_order() {
        let file = "\u{feff}code,name,brand\r\nSKU-1,\"삼다수 2L, x 12\",제주\r\n\r\n,\"Spam \"\"Classic\"\"\n200g\",\n";
        let products = read_products("p.csv", file.as_bytes()).unwrap();
        assert_eq!(
            names(&products),
            [
                ("제주 삼다수 2L, x 12", "SKU-1"),
                ("Spam \"Classic\" 200g", "")
            ]
        );
    }

    #[test]
    fn without_a_header_columns_are_name_code_brand() {
        let products = read_products(
            "p.csv",
            "햇반 210g 12개,,CJ\n\"CJ 햇반\",X1,cj\n".as_bytes(),
        )
        .unwrap();
        assert_eq!(
            names(&products),
            [("CJ 햇반 210g 12개", ""), ("CJ 햇반", "X1")]
        );
    }

    #[test]
    fn hint_columns_are_the_products_hints() {
        let file = "name,code,brand,model_code,gtin\n\
                    갤럭시 S24 울트라 256GB,SKU-1,삼성,SM-S928N,8801-2345-6789-3\n\
                    제주 삼다수 2L x 12,,,,\n";
        let products = read_products("p.csv", file.as_bytes()).unwrap();
        assert_eq!(
            products[0],
            pb::Product {
                code: "SKU-1".into(),
                // NB: the brand column still goes in front of the name, as before hints.
                name: "삼성 갤럭시 S24 울트라 256GB".into(),
                brand: "삼성".into(),
                model_code: "SM-S928N".into(),
                gtin: "8801234567893".into(),
            }
        );
        assert_eq!(
            products[1],
            pb::Product {
                name: "제주 삼다수 2L x 12".into(),
                ..Default::default()
            }
        );
    }

    #[test]
    fn errors_name_the_file_the_line_and_the_column() {
        let err = |s: &str| {
            read_products("products.csv", s.as_bytes())
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            err("name,code\na,1\n\"b\nc\",2\n  ,3\n"),
            "products.csv line 5: name must not be empty"
        );
        assert_eq!(
            err("a,bad code!\n"),
            "products.csv line 1: code only letters, digits, '.', '_', ':' and '-' are allowed"
        );
        assert_eq!(
            err("a,1,b,m,8801234567893,extra\n"),
            "products.csv line 1: 6 columns; expected at most 5 (name, code, brand, model_code, gtin)"
        );
        assert_eq!(
            err("name,gtin\na,8801234567893\nb,8801234567894\n"),
            "products.csv line 3: gtin the check digit (the last digit) does not match the others"
        );
        assert_eq!(
            err("name,model_code\na,SM*S928N\n"),
            "products.csv line 2: model_code '*' is not allowed (letters, digits, spaces and \"-_./+()\" are)"
        );
        assert_eq!(
            err("name,code,Name\n"),
            "products.csv line 1: column name twice in the header"
        );
        assert_eq!(
            err("name,code\na,1,x\n"),
            "products.csv line 2: 3 columns; the header has 2"
        );
        assert_eq!(err("name\n"), "products.csv: no products in it");
        let bytes = b"ok\n\xff\xfe,1\n";
        assert_eq!(
            read_products("products.csv", bytes)
                .unwrap_err()
                .to_string(),
            "products.csv line 2: name is not UTF-8 (save the file as CSV UTF-8)"
        );
        let many: String = (0..=MAX_PRODUCTS_PER_SEARCH)
            .map(|i| format!("p{i}\n"))
            .collect();
        assert!(
            err(&many).ends_with("201 products; one search takes at most 200 (split the file)")
        );
    }

    #[test]
    fn written_rows_read_back_and_formulas_are_defused() {
        let status = pb::SearchStatus {
            search_id: 7,
            products: vec![pb::ProductStatus {
                product: Some(pb::Product {
                    code: "A,1".into(),
                    name: "Spam \"Classic\", 200g\nx10".into(),
                    model_code: "SP-200".into(),
                    gtin: "8801234567893".into(),
                    ..Default::default()
                }),
                malls: vec![pb::MallStatus {
                    mall: "alpha".into(),
                    state: pb::JobState::Done as i32,
                    outcome: pb::Outcome::Found as i32,
                    offers: vec![pb::Offer {
                        mall: "alpha".into(),
                        title: "=HYPERLINK(\"x\")".into(),
                        price: 1000,
                        shipping_fee: 0,
                        effective_price: None,
                        shipping: pb::ShippingStatus::Unknown as i32,
                        currency: "KRW".into(),
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let out = search_status(&status, true);
        assert!(out.starts_with(BOM) && out.contains("\r\n"));
        let mut reader = ::csv::Reader::from_reader(out.trim_start_matches(BOM).as_bytes());
        let header: Vec<String> = reader
            .headers()
            .unwrap()
            .iter()
            .map(str::to_owned)
            .collect();
        assert_eq!(header, SEARCH_HEADER);
        let row = reader.records().next().unwrap().unwrap();
        assert_eq!(&row[2], "Spam \"Classic\", 200g\nx10");
        assert_eq!(&row[3], "A,1");
        assert_eq!(&row[7], "1000");
        assert_eq!(&row[8], "unknown");
        assert_eq!(&row[10], "", "no effective price without known shipping");
        assert_eq!(&row[13], "'=HYPERLINK(\"x\")");
        assert_eq!((&row[21], &row[22]), ("SP-200", "8801234567893"));
        // The hints read back in with the product (the code aside: it is no valid code).
        let back = read_products("out.csv", out.replace("A,1", "A1").as_bytes()).unwrap();
        assert_eq!(
            (back[0].model_code.as_str(), back[0].gtin.as_str()),
            ("SP-200", "8801234567893")
        );
    }
}
