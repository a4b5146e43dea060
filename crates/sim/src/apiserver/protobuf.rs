//! The protobuf wire format: a writer (the OpenAPI v2 document kubectl up to 1.27 fetches from
//! `/openapi/v2`, and Kubernetes objects in `kube_protobuf`) and a reader of one message's fields.

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

    /// A varint field (int32, int64, uint64, bool, enum), written even when zero: Kubernetes'
    /// proto2 messages mark presence by writing the field.
    pub fn varint(mut self, field: u32, value: u64) -> Self {
        varint(&mut self.0, u64::from(field) << 3);
        varint(&mut self.0, value);
        self
    }

    /// A bytes (or string) field, written even when empty.
    pub fn bytes(mut self, field: u32, bytes: &[u8]) -> Self {
        self.length_delimited(field, bytes);
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

/// One field's value as the wire carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireValue<'a> {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 2: bytes, a string, an embedded message or a packed repeated field.
    Bytes(&'a [u8]),
    /// Wire type 1.
    Fixed64(u64),
    /// Wire type 5.
    Fixed32(u32),
}

/// A message that does not follow the wire format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed protobuf at byte {offset}: {what}")]
pub struct WireError {
    pub offset: usize,
    pub what: &'static str,
}

/// The fields of one message, in the order written: `(field number, value)`.
pub struct Fields<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Fields<'a> {
    /// Read the fields of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, at: 0 }
    }

    fn error(&self, what: &'static str) -> WireError {
        WireError {
            offset: self.at,
            what,
        }
    }

    fn read_varint(&mut self) -> Result<u64, WireError> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self
                .bytes
                .get(self.at)
                .ok_or_else(|| self.error("a varint runs past the end"))?;
            self.at += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(self.error("a varint is longer than 10 bytes"))
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8], WireError> {
        let end = self
            .at
            .checked_add(len)
            .filter(|end| *end <= self.bytes.len())
            .ok_or_else(|| self.error("a field runs past the end"))?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    fn read_field(&mut self) -> Result<(u32, WireValue<'a>), WireError> {
        let key = self.read_varint()?;
        let field = u32::try_from(key >> 3)
            .ok()
            .filter(|f| *f != 0)
            .ok_or_else(|| self.error("a field number is out of range"))?;
        let value = match key & 7 {
            0 => WireValue::Varint(self.read_varint()?),
            1 => {
                let raw = self.take(8)?;
                let mut eight = [0u8; 8];
                eight.copy_from_slice(raw);
                WireValue::Fixed64(u64::from_le_bytes(eight))
            }
            2 => {
                let len = usize::try_from(self.read_varint()?)
                    .map_err(|_| self.error("a length is out of range"))?;
                WireValue::Bytes(self.take(len)?)
            }
            5 => {
                let raw = self.take(4)?;
                let mut four = [0u8; 4];
                four.copy_from_slice(raw);
                WireValue::Fixed32(u32::from_le_bytes(four))
            }
            _ => return Err(self.error("an unsupported wire type (groups are not read)")),
        };
        Ok((field, value))
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, WireValue<'a>), WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.at >= self.bytes.len() {
            return None;
        }
        let field = self.read_field();
        if field.is_err() {
            // Stop after the first error: what follows cannot be framed.
            self.at = self.bytes.len();
        }
        Some(field)
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

    #[test]
    fn the_reader_reads_what_the_writer_writes() {
        let inner = Message::new().string(1, "a");
        let bytes = Message::new()
            .varint(1, 300)
            .bytes(2, b"")
            .message(3, inner)
            .varint(4, u64::MAX)
            .into_bytes();
        let fields: Vec<_> = Fields::new(&bytes).collect::<Result<_, _>>().unwrap();
        assert_eq!(
            fields,
            vec![
                (1, WireValue::Varint(300)),
                (2, WireValue::Bytes(b"")),
                (3, WireValue::Bytes(&[0x0a, 0x01, b'a'])),
                (4, WireValue::Varint(u64::MAX)),
            ]
        );
    }

    #[test]
    fn truncated_or_malformed_input_is_an_error_not_a_panic() {
        for bad in [
            &[0x0a, 0x05, b'a'][..], // length 5, one byte follows
            &[0x08][..],             // a key without its varint
            &[0x08, 0xff][..],       // an unfinished varint
            &[0x0b][..],             // wire type 3 (group)
            &[0x00, 0x01][..],       // field number 0
            &[0x09, 1, 2][..],       // fixed64 cut short
            &[0xff; 11][..],         // an 11-byte varint
        ] {
            let result: Result<Vec<_>, _> = Fields::new(bad).collect();
            assert!(result.is_err(), "{bad:?}");
        }
    }
}
