//! The `strimzi.io/revision` pod annotation: a short, stable hash over the pod definition and
//! its node configuration, so a pod is rolled exactly when what it runs with changes.

use sha2::{Digest, Sha256};

/// Hex characters kept of the SHA-256: 64 bits, plenty to tell revisions of one pod apart.
const LENGTH: usize = 16;

/// Hash of `parts`, in order. Each part is prefixed with its length, so moving bytes between
/// parts (`("ab", "c")` vs `("a", "bc")`) changes the hash.
pub fn revision(parts: &[&[u8]]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part);
    }
    let digest = hasher.finalize();
    let mut hex = String::with_capacity(LENGTH);
    for byte in digest.iter().take(LENGTH / 2) {
        hex.push(char::from(HEX[usize::from(byte >> 4)]));
        hex.push(char::from(HEX[usize::from(byte & 0xf)]));
    }
    hex
}

const HEX: &[u8; 16] = b"0123456789abcdef";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_and_short() {
        let a = revision(&[b"pod", b"config"]);
        assert_eq!(a.len(), 16);
        assert!(
            a.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        assert_eq!(a, revision(&[b"pod", b"config"]));
        // Pinned, so that an accidental change of the scheme (which would roll every pod) is
        // noticed: sha256 of [0,0,0,0,0,0,0,3] "pod" [0,0,0,0,0,0,0,6] "config".
        assert_eq!(a, "4b5e4c759d087028");
    }

    #[test]
    fn parts_are_delimited() {
        assert_ne!(revision(&[b"ab", b"c"]), revision(&[b"a", b"bc"]));
        assert_ne!(revision(&[b"abc"]), revision(&[b"abc", b""]));
        assert_ne!(revision(&[]), revision(&[b""]));
    }

    #[test]
    fn matches_sha256() {
        // The empty input is sha256 of nothing: e3b0c442...
        assert_eq!(revision(&[]), "e3b0c44298fc1c14");
    }
}
