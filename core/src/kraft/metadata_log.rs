//! The bytes of KRaft's metadata log (`__cluster_metadata-0`) that a quorum recovery reads and
//! writes: record batches (magic 2) of segments and snapshots, their control records, and the
//! `VotersRecord` (KIP-853) that holds a dynamic quorum's voter set. Only what a recovery
//! needs: data batches are skipped by their length, never decoded.

use thiserror::Error;

/// A batch that cannot be read where a whole one was expected.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum LogFormatError {
    #[error("batch at byte {at}: {why}")]
    Batch { at: usize, why: String },
    #[error("VotersRecord: {0}")]
    Voters(String),
}

/// Bytes before a batch's `batchLength` field ends (`baseOffset`, `batchLength`).
const LOG_OVERHEAD: usize = 12;
/// A batch's header, up to and including its record count.
const HEADER_LEN: usize = 61;
const CRC_FROM: usize = 21;
const MAGIC_V2: u8 = 2;
const CONTROL_FLAG: i16 = 0x20;
/// `ControlRecordType.KRAFT_VOTERS`.
pub const KRAFT_VOTERS: i16 = 6;

/// One record batch as it lies in a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch<'a> {
    /// Byte position in the file.
    pub position: usize,
    pub base_offset: i64,
    pub last_offset: i64,
    /// The leader epoch it was written in.
    pub epoch: i32,
    pub control: bool,
    /// The whole batch, header included.
    pub bytes: &'a [u8],
}

/// The batches of a segment or snapshot file, in order, and how many bytes they fill. A file
/// whose tail is torn (a crash while writing) ends with bytes that are no whole, valid batch:
/// [`Batches::valid_len`] is where Kafka's own recovery would cut it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batches<'a> {
    pub batches: Vec<Batch<'a>>,
    pub valid_len: usize,
}

/// Reads every whole batch of `file`, stopping at the first that is incomplete or fails its
/// checksum.
pub fn read_batches(file: &[u8]) -> Batches<'_> {
    let mut batches = Vec::new();
    let mut at = 0;
    while let Ok(batch) = batch_at(file, at) {
        at += batch.bytes.len();
        batches.push(batch);
    }
    Batches {
        batches,
        valid_len: at,
    }
}

fn batch_at(file: &[u8], at: usize) -> Result<Batch<'_>, LogFormatError> {
    let bad = |why: &str| LogFormatError::Batch {
        at,
        why: why.to_owned(),
    };
    let header = file
        .get(at..at + HEADER_LEN)
        .ok_or_else(|| bad("incomplete header"))?;
    let length = usize::try_from(i32_at(header, 8)).map_err(|_| bad("negative length"))?;
    let bytes = file
        .get(at..at + LOG_OVERHEAD + length)
        .filter(|b| b.len() >= HEADER_LEN)
        .ok_or_else(|| bad("incomplete batch"))?;
    if bytes[16] != MAGIC_V2 {
        return Err(bad("not a magic 2 batch"));
    }
    if crc32c(&bytes[CRC_FROM..])
        != u32::from_be_bytes([bytes[17], bytes[18], bytes[19], bytes[20]])
    {
        return Err(bad("checksum mismatch"));
    }
    let base_offset = i64::from_be_bytes(to_array(&bytes[0..8]));
    Ok(Batch {
        position: at,
        base_offset,
        last_offset: base_offset + i64::from(i32_at(bytes, 23)),
        epoch: i32_at(bytes, 12),
        control: i16::from_be_bytes([bytes[21], bytes[22]]) & CONTROL_FLAG != 0,
        bytes,
    })
}

fn i32_at(bytes: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(to_array(&bytes[at..at + 4]))
}

fn to_array<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut out = [0; N];
    out.copy_from_slice(&bytes[..N]);
    out
}

/// One record of a control batch: its control type and value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlRecord<'a> {
    pub offset: i64,
    pub kind: i16,
    pub value: &'a [u8],
}

/// The records of a control batch (control batches are never compressed).
pub fn control_records<'a>(batch: &Batch<'a>) -> Result<Vec<ControlRecord<'a>>, LogFormatError> {
    let bad = |why: String| LogFormatError::Batch {
        at: batch.position,
        why,
    };
    if !batch.control {
        return Err(bad("not a control batch".into()));
    }
    let count = i32_at(batch.bytes, 57);
    let mut r = Reader::new(&batch.bytes[HEADER_LEN..]);
    let mut out = Vec::new();
    for _ in 0..count {
        let record = (|| {
            let length = usize::try_from(r.varint()?).map_err(|_| "negative record length")?;
            let mut rec = Reader::new(r.take(length)?);
            rec.take(1)?; // attributes
            rec.varlong()?; // timestamp delta
            let offset_delta = rec.varint()?;
            let key = rec.bytes_varint()?.ok_or("control record without key")?;
            let value = rec.bytes_varint()?.unwrap_or_default();
            let mut key = Reader::new(key);
            key.i16()?; // key version
            Ok::<_, &'static str>(ControlRecord {
                offset: batch.base_offset + i64::from(offset_delta),
                kind: key.i16()?,
                value,
            })
        })()
        .map_err(|e| bad(e.to_owned()))?;
        out.push(record);
    }
    Ok(out)
}

/// One voter of a `VotersRecord`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Voter {
    pub id: i32,
    pub directory_id: u128,
    /// Listener name, host and port of each of its endpoints.
    pub endpoints: Vec<(String, String, u16)>,
    /// The `kraft.version` range it supports.
    pub kraft_version: (i16, i16),
}

/// A dynamic quorum's voter set as the metadata log records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VotersRecord {
    pub version: i16,
    pub voters: Vec<Voter>,
}

impl VotersRecord {
    /// Decodes a `VotersRecord` value (version 0, a flexible message: compact arrays and
    /// strings, tagged fields skipped).
    pub fn decode(value: &[u8]) -> Result<VotersRecord, LogFormatError> {
        let mut r = Reader::new(value);
        let record = (|| {
            let version = r.i16()?;
            let mut voters = Vec::new();
            for _ in 0..r.compact_len()? {
                let id = r.i32()?;
                let directory_id = u128::from_be_bytes(to_array(r.take(16)?));
                let mut endpoints = Vec::new();
                for _ in 0..r.compact_len()? {
                    let name = r.compact_string()?;
                    let host = r.compact_string()?;
                    let port = u16::from_be_bytes(to_array(r.take(2)?));
                    r.skip_tagged()?;
                    endpoints.push((name, host, port));
                }
                let kraft_version = (r.i16()?, r.i16()?);
                r.skip_tagged()?;
                r.skip_tagged()?;
                voters.push(Voter {
                    id,
                    directory_id,
                    endpoints,
                    kraft_version,
                });
            }
            r.skip_tagged()?;
            Ok::<_, &'static str>(VotersRecord { version, voters })
        })();
        record.map_err(|e| LogFormatError::Voters(e.to_owned()))
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut w = Vec::new();
        w.extend(self.version.to_be_bytes());
        put_uvarint(&mut w, self.voters.len() as u64 + 1);
        for v in &self.voters {
            w.extend(v.id.to_be_bytes());
            w.extend(v.directory_id.to_be_bytes());
            put_uvarint(&mut w, v.endpoints.len() as u64 + 1);
            for (name, host, port) in &v.endpoints {
                put_compact_string(&mut w, name);
                put_compact_string(&mut w, host);
                w.extend(port.to_be_bytes());
                w.push(0);
            }
            w.extend(v.kraft_version.0.to_be_bytes());
            w.extend(v.kraft_version.1.to_be_bytes());
            w.push(0); // KRaftVersionFeature's tagged fields
            w.push(0); // the voter's
        }
        w.push(0);
        w
    }
}

/// A control batch of one `VotersRecord`, as a leader of `epoch` writes it at `base_offset`.
pub fn voters_batch(
    base_offset: i64,
    epoch: i32,
    timestamp_ms: i64,
    voters: &VotersRecord,
) -> Vec<u8> {
    let mut key = Vec::new();
    key.extend(0i16.to_be_bytes());
    key.extend(KRAFT_VOTERS.to_be_bytes());
    let value = voters.encode();
    let mut record = vec![0u8]; // attributes
    put_varlong(&mut record, 0); // timestamp delta
    put_varlong(&mut record, 0); // offset delta
    put_varlong(&mut record, key.len() as i64);
    record.extend(&key);
    put_varlong(&mut record, value.len() as i64);
    record.extend(&value);
    put_varlong(&mut record, 0); // headers

    let mut batch = Vec::new();
    batch.extend(base_offset.to_be_bytes());
    batch.extend([0; 4]); // batch length, below
    batch.extend(epoch.to_be_bytes());
    batch.push(MAGIC_V2);
    batch.extend([0; 4]); // crc, below
    batch.extend(CONTROL_FLAG.to_be_bytes());
    batch.extend(0i32.to_be_bytes()); // last offset delta
    batch.extend(timestamp_ms.to_be_bytes());
    batch.extend(timestamp_ms.to_be_bytes());
    batch.extend((-1i64).to_be_bytes()); // producer ID
    batch.extend((-1i16).to_be_bytes()); // producer epoch
    batch.extend((-1i32).to_be_bytes()); // base sequence
    batch.extend(1i32.to_be_bytes());
    put_varlong(&mut batch, record.len() as i64);
    batch.extend(&record);
    let length = (batch.len() - LOG_OVERHEAD) as i32;
    batch[8..12].copy_from_slice(&length.to_be_bytes());
    let crc = crc32c(&batch[CRC_FROM..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    batch
}

/// The last `VotersRecord` among `batches` whose offset is at least `from`, and its offset.
pub fn last_voters(
    batches: &[Batch<'_>],
    from: i64,
) -> Result<Option<(i64, VotersRecord)>, LogFormatError> {
    let mut last = None;
    for batch in batches
        .iter()
        .filter(|b| b.control && b.last_offset >= from)
    {
        for record in control_records(batch)? {
            if record.kind == KRAFT_VOTERS && record.offset >= from {
                last = Some((record.offset, VotersRecord::decode(record.value)?));
            }
        }
    }
    Ok(last)
}

/// CRC-32C (Castagnoli), as Kafka checks batches with.
pub fn crc32c(bytes: &[u8]) -> u32 {
    const POLY: u32 = 0x82F6_3B78;
    let mut crc = !0u32;
    for b in bytes {
        crc ^= u32::from(*b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ POLY
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn put_uvarint(w: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        w.push((v as u8) | 0x80);
        v >>= 7;
    }
    w.push(v as u8);
}

fn put_varlong(w: &mut Vec<u8>, v: i64) {
    put_uvarint(w, ((v << 1) ^ (v >> 63)) as u64);
}

fn put_compact_string(w: &mut Vec<u8>, s: &str) {
    put_uvarint(w, s.len() as u64 + 1);
    w.extend(s.as_bytes());
}

/// A cursor over bytes; every read fails rather than panics past the end.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], &'static str> {
        if n > self.bytes.len() {
            return Err("truncated");
        }
        let (head, tail) = self.bytes.split_at(n);
        self.bytes = tail;
        Ok(head)
    }

    fn i16(&mut self) -> Result<i16, &'static str> {
        Ok(i16::from_be_bytes(to_array(self.take(2)?)))
    }

    fn i32(&mut self) -> Result<i32, &'static str> {
        Ok(i32::from_be_bytes(to_array(self.take(4)?)))
    }

    fn uvarint(&mut self) -> Result<u64, &'static str> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.take(1)?[0];
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint too long")
    }

    fn varlong(&mut self) -> Result<i64, &'static str> {
        let v = self.uvarint()?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    fn varint(&mut self) -> Result<i32, &'static str> {
        i32::try_from(self.varlong()?).map_err(|_| "varint out of range")
    }

    /// Bytes prefixed by a signed varint length; `None` for length -1.
    fn bytes_varint(&mut self) -> Result<Option<&'a [u8]>, &'static str> {
        match self.varint()? {
            -1 => Ok(None),
            n => Ok(Some(
                self.take(usize::try_from(n).map_err(|_| "bad length")?)?,
            )),
        }
    }

    fn compact_len(&mut self) -> Result<u64, &'static str> {
        self.uvarint()?.checked_sub(1).ok_or("null array")
    }

    fn compact_string(&mut self) -> Result<String, &'static str> {
        let len = usize::try_from(self.compact_len()?).map_err(|_| "bad length")?;
        String::from_utf8(self.take(len)?.to_vec()).map_err(|_| "string is not UTF-8")
    }

    fn skip_tagged(&mut self) -> Result<(), &'static str> {
        for _ in 0..self.uvarint()? {
            self.uvarint()?;
            let size = usize::try_from(self.uvarint()?).map_err(|_| "bad length")?;
            self.take(size)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn voters(ids: &[i32]) -> VotersRecord {
        VotersRecord {
            version: 0,
            voters: ids
                .iter()
                .map(|id| Voter {
                    id: *id,
                    directory_id: 1000 + *id as u128,
                    endpoints: vec![("CONTROLPLANE-9090".into(), format!("c-{id}.example"), 9090)],
                    kraft_version: (0, 1),
                })
                .collect(),
        }
    }

    #[test]
    fn crc32c_matches_the_standard_check_value() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    /// The bytes Kafka 4.1.2 and 4.3.1 write for this record (`MemoryRecords.withVotersRecord`).
    #[test]
    fn a_voters_batch_is_byte_for_byte_what_kafka_writes() {
        let record = VotersRecord {
            version: 0,
            voters: vec![Voter {
                id: 1,
                directory_id: 0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10,
                endpoints: vec![("CONTROLLER".into(), "c1".into(), 9093)],
                kraft_version: (0, 1),
            }],
        };
        let kafka = "00000000000004d2 0000006c 00000007 02 3270b082 0020 00000000 \
                     0000018bcfe56800 0000018bcfe56800 ffffffffffffffff ffff ffffffff 00000001 \
                     74 00 00 00 08 00000006 60 \
                     0000 02 00000001 0102030405060708090a0b0c0d0e0f10 02 0b 434f4e54524f4c4c4552 \
                     03 6331 2385 00 0000 0001 00 00 00 00";
        let hex: String = kafka.chars().filter(char::is_ascii_hexdigit).collect();
        let bytes: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        assert_eq!(voters_batch(1234, 7, 1_700_000_000_000, &record), bytes);
    }

    #[test]
    fn a_voters_record_survives_encoding() {
        let record = voters(&[0, 1, 2]);
        assert_eq!(VotersRecord::decode(&record.encode()).unwrap(), record);
        assert!(VotersRecord::decode(&record.encode()[..10]).is_err());
    }

    #[test]
    fn a_voters_batch_is_read_back_as_a_control_batch_with_its_record() {
        let mut file = voters_batch(41, 7, 1_700_000_000_000, &voters(&[0, 1, 2]));
        file.extend(voters_batch(42, 8, 1_700_000_000_001, &voters(&[0])));
        let read = read_batches(&file);
        assert_eq!(read.valid_len, file.len());
        assert_eq!(read.batches.len(), 2);
        let second = &read.batches[1];
        assert_eq!(
            (second.base_offset, second.last_offset, second.epoch),
            (42, 42, 8)
        );
        assert!(second.control);
        assert_eq!(
            last_voters(&read.batches, 0).unwrap(),
            Some((42, voters(&[0])))
        );
        assert_eq!(
            last_voters(&read.batches[..1], 0).unwrap(),
            Some((41, voters(&[0, 1, 2])))
        );
        assert_eq!(last_voters(&read.batches, 43).unwrap(), None);
    }

    #[test]
    fn a_torn_or_corrupt_tail_ends_the_valid_bytes() {
        let first = voters_batch(0, 1, 0, &voters(&[0]));
        let mut torn = first.clone();
        torn.extend(&voters_batch(1, 1, 0, &voters(&[0]))[..30]);
        let read = read_batches(&torn);
        assert_eq!((read.batches.len(), read.valid_len), (1, first.len()));

        let mut corrupt = first.clone();
        let mut second = voters_batch(1, 1, 0, &voters(&[0]));
        let last = second.len() - 1;
        second[last] ^= 0xff;
        corrupt.extend(second);
        assert_eq!(read_batches(&corrupt).valid_len, first.len());
        assert_eq!(read_batches(&[]).valid_len, 0);
    }
}
