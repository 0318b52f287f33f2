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

/// A UUID as Kafka's `Uuid.randomUuid` makes them, from 16 random bytes: the top bit cleared
/// (its text then never starts with `-`, which tools read as an option) and never one of the
/// first 100 values, which Kafka reserves (e.g. a directory ID of 0 means "unknown").
pub fn kafka_uuid(random: [u8; 16]) -> u128 {
    let bits = u128::from_be_bytes(random) & !(1u128 << 127);
    if bits < 100 { bits + 100 } else { bits }
}

/// Kafka's text form of a 128-bit UUID (22 characters).
pub fn uuid_text(bits: u128) -> String {
    base64url(&bits.to_be_bytes())
}

/// The 128 bits of a UUID in Kafka's text form; `None` if `text` is not one.
pub fn parse_uuid_text(text: &str) -> Option<u128> {
    if text.len() != 22 {
        return None;
    }
    let mut bits: u128 = 0;
    for (i, c) in text.bytes().enumerate() {
        let v = ALPHABET.iter().position(|a| *a == c)? as u128;
        // 22 characters carry 132 bits: the last one holds the final 2 bits in its top bits,
        // and its other 4 bits must be 0.
        bits = if i < 21 {
            (bits << 6) | v
        } else if v & 0xf == 0 {
            (bits << 2) | (v >> 4)
        } else {
            return None;
        };
    }
    Some(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_uuids_are_never_reserved_and_never_read_as_an_option() {
        assert_eq!(kafka_uuid([0; 16]), 100);
        let all_ones = kafka_uuid([0xff; 16]);
        assert!(!uuid_text(all_ones).starts_with('-'));
        assert_eq!(all_ones, u128::MAX >> 1);
    }

    #[test]
    fn encodes_as_kafka_does() {
        // RFC 4648 test vectors, base64url without padding.
        assert_eq!(base64url(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64url(b"fo"), "Zm8");
        // Kafka's Uuid.ONE_UUID and a value with the URL-safe characters.
        assert_eq!(uuid_text(1), "AAAAAAAAAAAAAAAAAAAAAQ");
        assert_eq!(uuid_text(u128::MAX), "_____________________w");
    }

    #[test]
    fn reads_back_what_it_writes() {
        for bits in [
            0,
            1,
            100,
            u128::MAX,
            0x0123_4567_89ab_cdef_fedc_ba98_7654_3210,
        ] {
            assert_eq!(parse_uuid_text(&uuid_text(bits)), Some(bits));
        }
        assert_eq!(parse_uuid_text("short"), None);
        assert_eq!(parse_uuid_text("_____________________x"), None);
        assert_eq!(parse_uuid_text("AAAAAAAAAAAAAAAAAAAA*A"), None);
    }
}
