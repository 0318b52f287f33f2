//! Kafka's text form of its UUIDs (cluster IDs, metadata directory IDs): URL-safe base64
//! without padding, as `Uuid.toString` writes them.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// URL-safe base64 of `bytes`, without padding.
pub fn base64url(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
        }
    }
    out
}

/// Kafka's text form of a 128-bit UUID (22 characters).
pub fn uuid_text(bits: u128) -> String {
    base64url(&bits.to_be_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_as_kafka_does() {
        // RFC 4648 test vectors, base64url without padding.
        assert_eq!(base64url(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64url(b"fo"), "Zm8");
        // Kafka's Uuid.ONE_UUID and a value with the URL-safe characters.
        assert_eq!(uuid_text(1), "AAAAAAAAAAAAAAAAAAAAAQ");
        assert_eq!(uuid_text(u128::MAX), "_____________________w");
    }
}
