//! kubectl-style plain tables: upper-case headers, columns padded by three spaces.

#[derive(Debug, Default)]
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(headers: &[&str]) -> Self {
        Self { headers: headers.iter().map(|h| h.to_string()).collect(), rows: Vec::new() }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn render(&self, indent: &str) -> String {
        let columns = self.headers.len();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate().take(columns) {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for line in std::iter::once(&self.headers).chain(&self.rows) {
            let mut text = String::from(indent);
            for (i, cell) in line.iter().enumerate().take(columns) {
                text.push_str(cell);
                if i + 1 < columns {
                    text.push_str(&" ".repeat(widths[i] - cell.chars().count() + 3));
                }
            }
            out.push_str(text.trim_end());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pads_columns() {
        let mut t = Table::new(&["A", "BB"]);
        t.row(vec!["xxxx".into(), "y".into()]);
        assert_eq!(t.render(""), "A      BB\nxxxx   y\n");
    }
}
