//! Aligned plain-text tables that know East Asian wide characters (a Hangul syllable takes
//! two terminal columns), so Korean titles line up.

/// A table: a header row and data rows, rendered with two spaces between columns.
#[derive(Debug, Clone, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Self {
        Self {
            header: header.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row; cells are cleaned of control characters.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells.iter().map(|c| clean(c)).collect());
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The rendered table, one line per row, each ending in a newline. The last column is
    /// not padded.
    pub fn render(&self) -> String {
        let columns = self.header.len();
        let mut widths: Vec<usize> = self.header.iter().map(|h| width(h)).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate().take(columns) {
                widths[i] = widths[i].max(width(cell));
            }
        }
        let mut out = String::new();
        for row in std::iter::once(&self.header).chain(&self.rows) {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate().take(columns) {
                if i > 0 {
                    line.push_str("  ");
                }
                line.push_str(cell);
                if i + 1 < columns {
                    line.extend(std::iter::repeat_n(' ', widths[i] - width(cell)));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// Control characters (escape sequences, newlines) replaced by spaces.
pub fn clean(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// Terminal columns `s` takes.
pub fn width(s: &str) -> usize {
    s.chars().map(char_width).sum()
}

fn char_width(c: char) -> usize {
    match u32::from(c) {
        0x1100..=0x115F
        | 0x2E80..=0x303E
        | 0x3041..=0x33FF
        | 0x3400..=0x4DBF
        | 0x4E00..=0x9FFF
        | 0xA000..=0xA4CF
        | 0xAC00..=0xD7A3
        | 0xF900..=0xFAFF
        | 0xFE30..=0xFE4F
        | 0xFF00..=0xFF60
        | 0xFFE0..=0xFFE6
        | 0x1F300..=0x1F64F
        | 0x1F900..=0x1F9FF
        | 0x20000..=0x3FFFD => 2,
        _ => 1,
    }
}

/// `s` cut to at most `max` columns, with `…` when cut.
pub fn truncate(s: &str, max: usize) -> String {
    if width(s) <= max {
        return s.to_owned();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in s.chars() {
        let w = char_width(c);
        if used + w + 1 > max {
            break;
        }
        out.push(c);
        used += w;
    }
    out.push('…');
    out
}

/// An amount of money with thousands separators: `12900` → `12,900`.
pub fn money(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if n < 0 {
        out.push('-');
    }
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wide_characters_align() {
        let mut t = Table::new(&["MALL", "TITLE", "PRICE"]);
        t.row(vec!["a".into(), "삼다수".into(), "1".into()]);
        t.row(vec!["bb".into(), "water".into(), "22".into()]);
        let out = t.render();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "MALL  TITLE   PRICE");
        assert_eq!(lines[1], "a     삼다수  1");
        assert_eq!(lines[2], "bb    water   22");
    }

    #[test]
    fn control_characters_are_removed() {
        let mut t = Table::new(&["X"]);
        t.row(vec!["evil\x1b[2Jtitle\nnext".into()]);
        assert_eq!(t.render(), "X\nevil [2Jtitle next\n");
    }

    #[test]
    fn money_and_truncation() {
        assert_eq!(money(0), "0");
        assert_eq!(money(999), "999");
        assert_eq!(money(12_900), "12,900");
        assert_eq!(money(1_234_567), "1,234,567");
        assert_eq!(money(-1_000), "-1,000");
        assert_eq!(truncate("abcdef", 4), "abc…");
        assert_eq!(truncate("삼다수워터", 5), "삼다…");
        assert_eq!(truncate("abc", 4), "abc");
    }
}
