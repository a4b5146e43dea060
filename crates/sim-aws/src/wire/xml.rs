//! A small XML writer for the query protocol answers: nested elements by closure (so every
//! element is closed), text always escaped.

use std::fmt::Write as _;

/// An XML document being written.
#[derive(Debug, Default)]
pub(crate) struct Xml {
    out: String,
}

impl Xml {
    /// A document starting with the XML declaration.
    pub(crate) fn document() -> Self {
        Self {
            out: String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"),
        }
    }

    /// `<name xmlns="namespace">…</name>`, the content written by `body`.
    pub(crate) fn root(&mut self, name: &str, namespace: &str, body: impl FnOnce(&mut Self)) {
        self.out.push('<');
        self.out.push_str(name);
        self.out.push_str(" xmlns=\"");
        escape_into(&mut self.out, namespace);
        self.out.push_str("\">");
        body(self);
        self.close(name);
    }

    /// `<name>…</name>`, the content written by `body`.
    pub(crate) fn el(&mut self, name: &str, body: impl FnOnce(&mut Self)) {
        self.open(name);
        body(self);
        self.close(name);
    }

    /// `<name>text</name>`.
    pub(crate) fn leaf(&mut self, name: &str, text: &str) {
        self.open(name);
        escape_into(&mut self.out, text);
        self.close(name);
    }

    /// `<name>value</name>` for a number or boolean.
    pub(crate) fn value(&mut self, name: &str, value: impl std::fmt::Display) {
        self.open(name);
        let _ = write!(self.out, "{value}");
        self.close(name);
    }

    /// `<name>text</name>` when there is a text.
    pub(crate) fn opt(&mut self, name: &str, text: Option<&str>) {
        if let Some(text) = text {
            self.leaf(name, text);
        }
    }

    /// `<name>text</name>` unless the text is empty.
    pub(crate) fn non_empty(&mut self, name: &str, text: &str) {
        if !text.is_empty() {
            self.leaf(name, text);
        }
    }

    /// `<name><member>…</member>…</name>`: a list whose entries are `member` elements (`item`
    /// in EC2, `member` in IAM), each written by `body`.
    pub(crate) fn list<T>(
        &mut self,
        name: &str,
        member: &str,
        items: impl IntoIterator<Item = T>,
        mut body: impl FnMut(&mut Self, T),
    ) {
        self.open(name);
        for item in items {
            self.el(member, |x| body(x, item));
        }
        self.close(name);
    }

    /// `<name><member>text</member>…</name>`.
    pub(crate) fn text_list<'a>(
        &mut self,
        name: &str,
        member: &str,
        items: impl IntoIterator<Item = &'a String>,
    ) {
        self.open(name);
        for item in items {
            self.leaf(member, item);
        }
        self.close(name);
    }

    /// The document's bytes.
    pub(crate) fn finish(self) -> Vec<u8> {
        self.out.into_bytes()
    }

    fn open(&mut self, name: &str) {
        self.out.push('<');
        self.out.push_str(name);
        self.out.push('>');
    }

    fn close(&mut self, name: &str) {
        self.out.push_str("</");
        self.out.push_str(name);
        self.out.push('>');
    }
}

/// Appends `text` escaped for element content and attribute values. Carriage returns become
/// references (a parser would fold them into line feeds); control characters XML cannot carry
/// become U+FFFD.
fn escape_into(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\r' => out.push_str("&#13;"),
            '\t' | '\n' => out.push(c),
            c if u32::from(c) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => {
                out.push('\u{fffd}');
            }
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_and_elements_nest() {
        let mut x = Xml::document();
        x.root("R", "urn:x", |x| {
            x.leaf("a", "<b> & \"c\" 'd'\r\u{1}");
            x.list("set", "item", [1, 2], |x, n| x.value("n", n));
            x.opt("absent", None);
            x.non_empty("empty", "");
        });
        let text = String::from_utf8(x.finish()).unwrap();
        assert!(text.ends_with(
            "<R xmlns=\"urn:x\"><a>&lt;b&gt; &amp; &quot;c&quot; &apos;d&apos;&#13;\u{fffd}</a>\
             <set><item><n>1</n></item><item><n>2</n></item></set></R>"
        ));
    }
}
