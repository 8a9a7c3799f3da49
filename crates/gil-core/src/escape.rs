//! Bytes from the outside world (an environment variable, a C string)
//! shown in a message as they are, whatever they hold.

/// `text` for a message: printable ASCII as is, `\\` and `\'` escaped,
/// `\t` `\n` `\r`, every other byte as `\xNN`; cut with `...` so that it
/// stays under `size` bytes.
pub(crate) fn shown(text: &[u8], size: usize) -> String {
    let mut out = String::new();
    for &c in text {
        let piece = match c {
            b'\\' | b'\'' => format!("\\{}", c as char),
            b'\t' => "\\t".to_owned(),
            b'\n' => "\\n".to_owned(),
            b'\r' => "\\r".to_owned(),
            0x20..=0x7e => (c as char).to_string(),
            _ => format!("\\x{c:02x}"),
        };
        if out.len() + piece.len() + 4 > size {
            out.push_str("...");
            break;
        }
        out.push_str(&piece);
    }
    out
}
