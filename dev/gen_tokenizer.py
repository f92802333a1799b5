#!/usr/bin/env python3
"""Converts GPT-2's tokenizer files (encoder.json: token strings -> ids; vocab.bpe: the merges in rank
order) into the project's GBPE tokenizer file (doc/formats.md), with each token stored as its raw bytes.

GPT-2 writes bytes as printable characters: the 188 printable bytes ('!'..'~', '¡'..'¬', '®'..'ÿ')
stand for themselves and the other 68 bytes, in increasing order, for U+0100, U+0101, ...
Usage: gen_tokenizer.py [--gpt2-dir DIR] [--out PATH]
"""
import argparse
import json
import os
import struct
import sys
import zlib

GBPE_MAGIC = 0x45504247
GBPE_VERSION = 1
EOT = "<|endoftext|>"


def unicode_to_byte():
    """The inverse of GPT-2's byte -> printable character map."""
    printable = [b for b in range(256) if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or 0xAE <= b <= 0xFF]
    mapping = {chr(b): b for b in printable}
    shifted = 0
    for b in range(256):
        if b not in printable:
            mapping[chr(256 + shifted)] = b
            shifted += 1
    return mapping


def build(gpt2_dir):
    char_to_byte = unicode_to_byte()
    with open(os.path.join(gpt2_dir, "encoder.json"), encoding="utf-8") as f:
        encoder = json.load(f)
    with open(os.path.join(gpt2_dir, "vocab.bpe"), encoding="utf-8") as f:
        lines = f.read().split("\n")
    if not lines[0].startswith("#version"):
        sys.exit(f"error: {gpt2_dir}/vocab.bpe: first line is not a #version line")
    merges = [line.split(" ") for line in lines[1:] if line]
    vocab_size = len(encoder)
    if sorted(encoder.values()) != list(range(vocab_size)):
        sys.exit(f"error: {gpt2_dir}/encoder.json: ids are not 0..{vocab_size - 1}")
    token_bytes = [b""] * vocab_size
    for token, i in encoder.items():
        token_bytes[i] = token.encode("utf-8") if token == EOT else bytes(char_to_byte[c] for c in token)
    payload = bytearray()
    for tb in token_bytes:
        payload += struct.pack("<H", len(tb)) + tb
    for k, pair in enumerate(merges):
        if len(pair) != 2 or pair[0] + pair[1] not in encoder:
            sys.exit(f"error: {gpt2_dir}/vocab.bpe: merge {k} {pair!r} does not make a token")
        payload += struct.pack("<3i", encoder[pair[0]], encoder[pair[1]], encoder[pair[0] + pair[1]])
    header = [0] * 256
    header[0:5] = [GBPE_MAGIC, GBPE_VERSION, zlib.crc32(payload), len(payload) & 0xFFFFFFFF, len(payload) >> 32]
    header[5:8] = [vocab_size, encoder[EOT], len(merges)]
    return struct.pack("<256I", *header) + bytes(payload)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--gpt2-dir", default=os.path.join(here, "..", "..", "shared", "data", "gpt2"))
    ap.add_argument("--out", default="data/gpt2_tokenizer.bin")
    args = ap.parse_args()
    data = build(args.gpt2_dir)
    with open(args.out + ".tmp", "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(args.out + ".tmp", args.out)


if __name__ == "__main__":
    main()
