//! Heavy static assets: product images (~150 KB each) and the web font (~100 KB).
//!
//! They exist to cost bytes: a browser that blocks images, fonts and media must transfer
//! measurably less through the gateway. The bodies are deterministic pseudo-random bytes
//! behind the right magic numbers (JPEG SOI/EOI, `wOF2`) so they do not compress away;
//! they are not decodable images or fonts, which no test needs. Built once, shared as
//! [`Bytes`] (cloning is a reference-count bump).

use std::sync::LazyLock;

use bytes::Bytes;

/// Size of every product image body.
pub const IMAGE_BYTES: usize = 150 * 1024;

/// Size of the web font body.
pub const FONT_BYTES: usize = 100 * 1024;

static IMAGE: LazyLock<Bytes> = LazyLock::new(|| {
    let mut body = Vec::with_capacity(IMAGE_BYTES);
    body.extend_from_slice(&[0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10]);
    body.extend_from_slice(b"JFIF\0");
    fill_noise(&mut body, IMAGE_BYTES - 2, 0x9E37_79B9_7F4A_7C15);
    body.extend_from_slice(&[0xFF, 0xD9]);
    Bytes::from(body)
});

static FONT: LazyLock<Bytes> = LazyLock::new(|| {
    let mut body = Vec::with_capacity(FONT_BYTES);
    body.extend_from_slice(b"wOF2");
    fill_noise(&mut body, FONT_BYTES, 0xD1B5_4A32_D192_ED03);
    Bytes::from(body)
});

/// The body served for `/img/<id>.jpg`.
pub fn image() -> Bytes {
    IMAGE.clone()
}

/// The body served for `/fonts/mall.woff2`.
pub fn font() -> Bytes {
    FONT.clone()
}

/// Appends xorshift64 bytes until `body` is `len` long.
fn fill_noise(body: &mut Vec<u8>, len: usize, seed: u64) {
    let mut state = seed;
    while body.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let take = (len - body.len()).min(8);
        body.extend_from_slice(&state.to_le_bytes()[..take]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_magic() {
        let img = image();
        assert_eq!(img.len(), IMAGE_BYTES);
        assert_eq!(&img[..2], &[0xFF, 0xD8]);
        assert_eq!(&img[img.len() - 2..], &[0xFF, 0xD9]);
        let font = font();
        assert_eq!(font.len(), FONT_BYTES);
        assert_eq!(&font[..4], b"wOF2");
    }
}
