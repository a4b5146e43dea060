//! A protobuf writer, just enough to encode the OpenAPI v2 document (gnostic's
//! `openapi_v2.Document`) that kubectl up to 1.27 fetches from `/openapi/v2`.

/// One message being written: fields appended in any order.
#[derive(Debug, Default, Clone)]
pub struct Message(Vec<u8>);

fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

impl Message {
    /// An empty message.
    pub fn new() -> Self {
        Self::default()
    }

    fn length_delimited(&mut self, field: u32, bytes: &[u8]) {
        varint(&mut self.0, (u64::from(field) << 3) | 2);
        varint(&mut self.0, bytes.len() as u64);
        self.0.extend_from_slice(bytes);
    }

    /// A string field (proto3: an empty string is not written).
    pub fn string(mut self, field: u32, text: &str) -> Self {
        if !text.is_empty() {
            self.length_delimited(field, text.as_bytes());
        }
        self
    }

    /// A bool field (proto3: false is not written).
    pub fn bool(mut self, field: u32, value: bool) -> Self {
        if value {
            varint(&mut self.0, u64::from(field) << 3);
            self.0.push(1);
        }
        self
    }

    /// An embedded message field (also one element of a repeated field).
    pub fn message(mut self, field: u32, message: Message) -> Self {
        self.length_delimited(field, &message.0);
        self
    }

    /// The encoded bytes.
    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Encodings checked against the protobuf specification's examples.
    #[test]
    fn fields_encode_as_the_wire_format_says() {
        assert_eq!(
            Message::new().string(2, "testing").into_bytes(),
            b"\x12\x07testing"
        );
        assert_eq!(
            Message::new().bool(20, true).into_bytes(),
            vec![0xa0, 0x01, 0x01]
        );
        assert_eq!(
            Message::new().string(1, "").bool(2, false).into_bytes(),
            Vec::<u8>::new()
        );
        let inner = Message::new().string(1, "a");
        assert_eq!(
            Message::new().message(3, inner).into_bytes(),
            vec![0x1a, 0x03, 0x0a, 0x01, b'a']
        );
        let mut long = Vec::new();
        varint(&mut long, 300);
        assert_eq!(long, vec![0xac, 0x02]);
    }
}
