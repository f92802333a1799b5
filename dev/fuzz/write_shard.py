"""Writes a GTOK token shard (doc/formats.md) with numpy-free Python, independent of the C code.
usage: write_shard.py PATH VOCAB N [KIND], token i mod VOCAB by KIND:
  noisy (default): 7i mod 61 + a pseudo-random 0..2;
  periodic:        7i mod 61 + (i div 997) mod 3 (no randomness: a model can learn it exactly);
  random:          uniform in [0, VOCAB).
The pseudo-random kinds are seeded by N, so a shard is the same on every run."""
import random
import struct
import sys
import zlib

path, vocab, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
kind = sys.argv[4] if len(sys.argv) > 4 else "noisy"
rnd = random.Random(n)
if kind == "noisy":
    tokens = [((i * 7) % 61 + rnd.randrange(3)) % vocab for i in range(n)]
elif kind == "periodic":
    tokens = [((i * 7) % 61 + (i // 997) % 3) % vocab for i in range(n)]
elif kind == "random":
    tokens = [rnd.randrange(vocab) for _ in range(n)]
else:
    sys.exit("error: write_shard.py: unknown KIND '%s' (noisy, periodic or random)" % kind)
payload = struct.pack("<%dH" % n, *tokens)
h = [0] * 256
h[0], h[1], h[2] = 0x4B4F5447, 1, zlib.crc32(payload)
h[3], h[4] = len(payload) & 0xFFFFFFFF, len(payload) >> 32
h[5], h[6], h[7], h[8] = n & 0xFFFFFFFF, n >> 32, vocab, 2
with open(path, "wb") as f:
    f.write(struct.pack("<256I", *h))
    f.write(payload)
