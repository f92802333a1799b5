#!/usr/bin/env python3
"""Tests of ./prepare_data and the tools' bad-input handling.

  * one 2.6 MB document (cut into chunks inside prepare_data) equals tiktoken on the whole text, and so
    does a 2.9 MB one of non-ASCII lines (CJK, Cyrillic, emoji; now also cut at its newlines);
  * JSON lines written by Python's json (escapes, surrogate pairs, nested values, other fields,
    blank lines) equal tiktoken on each decoded "text" field, with the documented val rule;
  * shards are byte-identical with --threads 1 and 2, and stale shards of an earlier run go away;
  * a separator line at any offset around the 1 MiB chunk boundary (also across it) starts a document;
  * a JSON key written with escapes names the field, as in Python's json; unpaired surrogate escapes
    (valid JSON) give tiktoken's tokens of json.loads' str (each one U+FFFD);
  * a text file is tiktoken of its bytes decoded as utf-8-sig (one leading byte order mark dropped, one
    further in kept), from a file or a pipe; a BOM before the first separator line does not hide it;
  * bad input (missing file, directory without text, broken JSON line, missing field, unwritable
    output directory, bad tokenizer files, bad ids): non-zero exit, one line naming the file (and
    line), no *.tmp left, and a failed run leaves the directory's earlier shards as they were;
  * a pipe or a device is checked for a NUL byte in its first 8 KiB read (gzip through <(cat x.gz),
    /dev/zero), and a stream with no cut point stops at 256 MiB instead of growing without bound;
    "not text" names UTF-16/UTF-32, and a UTF-16 byte order mark (CJK text has no NUL byte) is not text;
    a second run on a directory that one is writing stops at once and touches nothing; --doc-separator
    with '\r' is refused, and one that matched no line is warned about;
  * one pre-token piece over 16 MiB (260 MB of 'x' through a pipe under ulimit -v 2 GB; 16 MiB + 1 after
    12000 bytes, with and without --doc-separator, in a JSON field; ./tokenize too) stops the run naming the
    file and the byte offset (the line, for JSON), and a piece of exactly 16 MiB is merged;
  * "--input -" reads stdin; a directory's files come in byte order of their whole paths (a-b/y, a.txt,
    a/x); JSON numbers follow JSON's grammar as json.loads does (01, 1., .5, +1 are broken lines; NaN and
    Infinity are taken); invalid UTF-8 gets one warning a file with its count and first byte offset
    (Python's surrogateescape count on the adversarial text, with tiny and default buffers), shards unchanged;
  * build/prepare_data_small (64-byte chunks, 256-byte reads, 1 KiB batches, 1 MiB uncut at most; ASan)
    crosses every boundary thousands of times: its shards equal ./prepare_data's on the fortunes, on
    adversarial text (separator lines, CRLF, lone CR, invalid UTF-8, long runs; also against tiktoken
    per document) and on JSON lines, and a JSON line over its 1 MiB names its line number.
Ends with "N passed, M failed".
"""
import fcntl
import glob
import gzip
import json
import math
import os
import random
import signal
import struct
import subprocess
import sys
import tempfile
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_tokenizer_exact import EOT, ROOT, check, first_diff, fortune_files, fortunes_dir, read_shards, ref_encode  # noqa: E402
import test_tokenizer_exact as common  # noqa: E402


def prepare(*args):
    return subprocess.run(["./prepare_data", *args], capture_output=True, cwd=ROOT, text=True)


def text_file_tokens(data):
    """prepare_data's definition of a text file's tokens: tiktoken on the file decoded as utf-8-sig
    (one leading UTF-8 byte order mark dropped; invalid UTF-8 as in ref_encode)"""
    return ref_encode(data.decode("utf-8-sig", "surrogateescape").encode("utf-8", "surrogateescape"))


def bash(script):
    """runs a bash script in ROOT (for <(...) inputs and ulimit)"""
    return subprocess.run(["bash", "-c", script], capture_output=True, cwd=ROOT, text=True, timeout=300)


def shard_bytes(d):
    return {os.path.basename(p): open(p, "rb").read() for p in sorted(glob.glob(os.path.join(d, "*.bin")))}


def expected_split(docs, fraction):
    expect = {"train": [], "val": []}
    for i, doc in enumerate(docs):
        split = "val" if math.floor((i + 1) * fraction) > math.floor(i * fraction) else "train"
        expect[split] += [EOT] + ref_encode(doc)
    return expect


def compare_splits(name, out_dir, expect):
    for split in ("train", "val"):
        tokens, sizes = read_shards(out_dir, split)
        ok = tokens == expect[split]
        j = first_diff(tokens or [], expect[split])
        check(ok, f"{name} {split}: {len(tokens or [])} tokens vs {len(expect[split])} from tiktoken: "
                  f"{'identical' if ok else f'first difference at {j}'}")


def expect_failure(name, result, must_name):
    line = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else ""
    ok = result.returncode != 0 and must_name in line and line.startswith("error:")
    check(ok, f"{name}: exit {result.returncode}, message: {line!r}")


def shards_intact(out_dir):
    """every final-named shard is complete, and no temporary file is left"""
    tmps = glob.glob(os.path.join(out_dir, "*.tmp"))
    for path in glob.glob(os.path.join(out_dir, "*.bin")):
        blob = open(path, "rb").read()
        h = struct.unpack("<256I", blob[:1024])
        if h[0] != 0x4B4F5447 or h[3] != len(blob) - 1024 or h[2] != zlib.crc32(blob[1024:]):
            return False, path
    return not tmps, tmps


def main():
    with tempfile.TemporaryDirectory() as tmp:
        src = fortunes_dir()
        corpus = b"".join(open(p, "rb").read() for p in fortune_files(src))

        # one big document: prepare_data cuts it into chunks; the tokens must not change
        big = os.path.join(tmp, "big.txt")
        open(big, "wb").write(corpus)
        r = prepare("--input", big, "--output-dir", os.path.join(tmp, "big"), "--val-fraction", "0")
        check(r.returncode == 0, f"prepare_data on one {len(corpus)}-byte document: exit {r.returncode}")
        compare_splits("one 2.6 MB document (chunked)", os.path.join(tmp, "big"), {"train": [EOT] + text_file_tokens(corpus), "val": []})

        rng = random.Random(11)
        pieces = ["日本語の文章", "Привет", "мир", "😀", "中文", "é", "ß", "١٢٣", "'s", "\u3000", "\u00a0", " ", "\t", "!"]
        lines = ["".join(rng.choice(pieces) for _ in range(rng.randrange(1, 40))) for _ in range(30000)]
        wide = "\n".join(lines).encode("utf-8")
        path = os.path.join(tmp, "wide.txt")
        open(path, "wb").write(wide)
        r = prepare("--input", path, "--output-dir", os.path.join(tmp, "wide"), "--val-fraction", "0")
        check(r.returncode == 0, f"prepare_data on one {len(wide)}-byte non-ASCII document: exit {r.returncode}")
        compare_splits("one non-ASCII document (chunked)", os.path.join(tmp, "wide"), {"train": [EOT] + text_file_tokens(wide), "val": []})

        # documents whose only cut points are white space before a word (no line ends "X\nY"): CRLF lines,
        # paragraphs between blank lines, one long line; each is cut into chunks at those points
        crlf = corpus.replace(b"\n", b"\r\n")
        paragraphs = corpus.replace(b"\n", b"\n\n")
        one_line = corpus.replace(b"\n", b" ")
        for name, doc in [("CRLF", crlf), ("blank-line paragraphs", paragraphs), ("single-line", one_line)]:
            path = os.path.join(tmp, "cut.txt")
            open(path, "wb").write(doc)
            d = os.path.join(tmp, "cut")
            r = prepare("--input", path, "--output-dir", d, "--val-fraction", "0")
            check(r.returncode == 0, f"prepare_data on a {len(doc)}-byte {name} document: exit {r.returncode}")
            compare_splits(f"one {name} document (chunked)", d, {"train": [EOT] + text_file_tokens(doc), "val": []})

        # the file's first read (16 MiB) ends inside a character: "...,\n\n" then the first byte of U+00A0
        # (White_Space); no cut point before (no white space), so the one before the second newline is the
        # candidate, valid only if the character after it is not White_Space: it must not be judged from
        # its first byte alone (the cut would split the whole's piece "\n\n", one token, into two)
        n = 16 << 20
        head = (b"hello," * (n // 6 + 1))[:n - 3]
        split_char = head + b"\n\n" + "\u00a0Y tail\n".encode()
        path = os.path.join(tmp, "split_char.txt")
        open(path, "wb").write(split_char)
        d = os.path.join(tmp, "split_char")
        r = prepare("--input", path, "--output-dir", d, "--val-fraction", "0", "--threads", "1")
        check(r.returncode == 0, f"prepare_data on a 16 MiB read ending inside U+00A0: exit {r.returncode}")
        compare_splits("a read ending inside U+00A0 (no cut there)", d, {"train": [EOT] + text_file_tokens(split_char), "val": []})
        os.remove(path)

        # with a separator, a blank line before it ends the document: "\n\n" is one token there (628), and a
        # chunk cut before the second "\n" would make it two
        for k in (10, 200):
            doc = b"x" * ((1 << 20) + k) + b"\n\n"
            path = os.path.join(tmp, "blank_sep.txt")
            open(path, "wb").write(doc + b"---\nbar\n")
            d = os.path.join(tmp, "blank_sep")
            r = prepare("--input", path, "--output-dir", d, "--doc-separator", "---", "--val-fraction", "0")
            compare_splits(f"a blank line before a separator past the chunk size (+{k})", d, expected_split([doc, b"bar\n"], 0))
        # empty files do not hold a read buffer each
        empties = os.path.join(tmp, "empties")
        os.mkdir(empties)
        for i in range(300):
            open(os.path.join(empties, f"e{i:03d}.txt"), "wb").close()
        open(os.path.join(empties, "z.txt"), "w").write("hello world\n")
        r = subprocess.run(["bash", "-c", f"ulimit -v 2000000; ./prepare_data --input {empties} --output-dir {tmp}/empties_out "
                            "--val-fraction 0 --threads 1"], capture_output=True, cwd=ROOT, text=True)
        check(r.returncode == 0, f"300 empty files and one text file under ulimit -v 2 GB: exit {r.returncode} {r.stderr.strip()[-120:]!r}")

        # determinism over thread counts, separators inside a large file
        outs = []
        for threads in ("1", "2"):
            d = os.path.join(tmp, f"t{threads}")
            r = prepare("--input", big, "--input", src, "--output-dir", d, "--doc-separator", "%",
                        "--shard-tokens", "50000", "--threads", threads, "--val-fraction", "0.01")
            outs.append(shard_bytes(d))
        check(outs[0] == outs[1] and len(outs[0]) > 10,
              f"--threads 1 and 2 give byte-identical shards ({len(outs[0])} files, {sum(map(len, outs[0].values()))} bytes)")

        # stale shards of an earlier run are removed
        d = os.path.join(tmp, "t1")
        r = prepare("--input", src, "--output-dir", d, "--doc-separator", "%", "--val-fraction", "0.01")
        names = sorted(os.listdir(d))
        check(r.returncode == 0 and names == ["train_000000.bin", "val_000000.bin"],
              f"a second run into the same directory leaves only its own shards: {names}")
        # a stale shard that cannot be deleted is an error naming it, not a leftover the trainer's glob reads (here a
        # directory named like a shard: unlink fails with EISDIR, as it would with EACCES for a non-root user)
        os.mkdir(os.path.join(d, "train_000001.bin"))
        r = prepare("--input", src, "--output-dir", d, "--doc-separator", "%", "--val-fraction", "0.01")
        expect_failure("a stale shard that cannot be deleted", r, "train_000001.bin: cannot delete this shard of an earlier")
        os.rmdir(os.path.join(d, "train_000001.bin"))

        # a separator line starting at 2^20 - k: before, across and at prepare_data's 1 MiB chunk boundary
        filler = (b"w" * 99 + b"\n") * 10485
        for sep, k in [("%", 0), ("%", 1), ("%", 2), ("%%", 1), ("%%", 3), ("----", 5)]:
            first = filler + b"y" * (1048576 - len(filler) - 1 - k) + b"\n"
            rest = [b"second doc\n", b"third doc\n" + b"more text here\n" * 2000]
            text = first + (sep.encode() + b"\n").join([b""] + rest)
            path = os.path.join(tmp, "boundary.txt")
            open(path, "wb").write(text)
            d = os.path.join(tmp, "boundary")
            r = prepare("--input", path, "--output-dir", d, "--doc-separator", sep, "--val-fraction", "0")
            check(r.returncode == 0, f"separator {sep!r} line at 2^20 - {k}: exit {r.returncode} {r.stderr.strip()[-200:]}")
            compare_splits(f"separator {sep!r} line at 2^20 - {k}: 3 documents", d, expected_split([first] + rest, 0))

        # JSON lines
        rng = random.Random(7)
        words = ["hello", " world", "naïve", "日本語", "😀", "'s", "\n", "\t", "\"quoted\"", "back\\slash", "\u2028", "123", "  "]
        docs, lines = [], []
        for i in range(3000):
            text = "".join(rng.choice(words) for _ in range(rng.randrange(1, 30)))
            obj = {"id": i, "meta": {"tags": ["a", {"b": [1, 2.5e3, None, True]}]}, "text": text, "z": "}"}
            lines.append(json.dumps(obj, ensure_ascii=bool(i % 2)))
            docs.append(text.encode("utf-8"))
            if i % 500 == 0:
                lines.append("")
        jsonl = os.path.join(tmp, "docs.jsonl")
        open(jsonl, "w", encoding="utf-8").write("\n".join(lines) + "\n")
        r = prepare("--input", jsonl, "--output-dir", os.path.join(tmp, "json"), "--val-fraction", "0.1")
        check(r.returncode == 0, f"prepare_data on {len(docs)} JSON lines: exit {r.returncode} {r.stderr.strip()[-200:]}")
        compare_splits("JSON lines", os.path.join(tmp, "json"), expected_split(docs, 0.1))
        escaped = os.path.join(tmp, "escaped_key.jsonl")
        open(escaped, "w").write('{"te\\u0078t": "hello", "t\\u00e9xt": "x"}\n{"text": "a", "text": "last wins"}\n')
        r = prepare("--input", escaped, "--output-dir", os.path.join(tmp, "escaped"), "--val-fraction", "0")
        check(r.returncode == 0, f"JSON keys with escapes: exit {r.returncode} {r.stderr.strip()[-200:]}")
        compare_splits("JSON keys with escapes, a repeated key (Python's json.loads)", os.path.join(tmp, "escaped"),
                       expected_split([json.loads(line)["text"].encode() for line in open(escaped)], 0))
        lone = os.path.join(tmp, "lone.jsonl")  # unpaired surrogate escapes: valid JSON (json.loads takes them)
        open(lone, "w").write("".join('{"text": "%s"}\n' % t for t in
                                      ["a\\ud800b", "\\ude00x", "\\ud83d\\ud83d", "\\ud800\\u0041", "pair \\ud83d\\ude00 ok", "end\\ud800"]))
        r = prepare("--input", lone, "--output-dir", os.path.join(tmp, "lone"), "--val-fraction", "0")
        check(r.returncode == 0, f"JSON lines with unpaired surrogate escapes: exit {r.returncode} {r.stderr.strip()[-200:]}")
        tokens, _ = read_shards(os.path.join(tmp, "lone"), "train")
        want = [t for line in open(lone) for t in [EOT] + common.ENC.encode(json.loads(line)["text"])]
        check(tokens == want, f"unpaired surrogate escapes equal tiktoken on json.loads' str (U+FFFD each): {len(tokens)} tokens, "
                              f"first difference at {first_diff(tokens or [], want)}")

        # bad input
        expect_failure("missing input file", prepare("--input", os.path.join(tmp, "nope.txt"), "--output-dir", tmp), "nope.txt")
        bindir = os.path.join(tmp, "bin_only")
        os.mkdir(bindir)
        open(os.path.join(bindir, "x.dat"), "wb").write(b"\x00\x01\x02")
        expect_failure("directory without text files", prepare("--input", bindir, "--output-dir", tmp), "bin_only: directory has no text")
        gz = os.path.join(tmp, "more.jsonl.gz")
        with gzip.open(gz, "wb") as f:
            f.write(b'{"text": "a compressed document"}\n')
        expect_failure("a compressed file named as input", prepare("--input", gz, "--output-dir", tmp), "more.jsonl.gz: not text")
        broken = os.path.join(tmp, "broken.jsonl")
        good = [json.dumps({"text": "line %d " % i * 50}) for i in range(4000)]
        open(broken, "w").write("\n".join(good + ['{"text": "unterminated}'] + good[:5]) + "\n")
        out_dir = os.path.join(tmp, "broken_out")
        earlier = prepare("--input", jsonl, "--output-dir", out_dir, "--shard-tokens", "20000", "--val-fraction", "0.1")
        before = shard_bytes(out_dir)
        r = prepare("--input", broken, "--output-dir", out_dir, "--shard-tokens", "20000")
        expect_failure("broken JSON line", r, f"broken.jsonl:{len(good) + 1}:")
        intact, what = shards_intact(out_dir)
        check(earlier.returncode == 0 and intact and shard_bytes(out_dir) == before and len(before) > 2,
              f"after the failure the directory holds the earlier run's {len(before)} shards, unchanged, and no .tmp "
              f"({len(shard_bytes(out_dir))} shards; {what or 'none bad'})")
        # SIGINT while the input is read (a FIFO: the signal comes before the input ends): exit 130, and the
        # directory keeps the earlier run's shards, unchanged
        fifo = os.path.join(tmp, "slow.txt")
        os.mkfifo(fifo)
        proc = subprocess.Popen(["./prepare_data", "--input", fifo, "--output-dir", out_dir], cwd=ROOT, stderr=subprocess.PIPE, text=True)
        with open(fifo, "wb") as w:  # opens once prepare_data does, after it has installed its handler
            w.write(corpus[:1000000])
            w.flush()
            proc.send_signal(signal.SIGINT)
            w.write(corpus[1000000:])
        err = proc.communicate(timeout=120)[1]
        intact, what = shards_intact(out_dir)
        check(proc.returncode == 130 and "stopped by SIGINT" in err and intact and shard_bytes(out_dir) == before,
              f"SIGINT: exit {proc.returncode}, the earlier {len(before)} shards unchanged, no .tmp ({err.strip()[-120:]!r})")
        # .tmp shards of a killed run (SIGKILL: nothing could remove them) go with a later run's stale shards
        for k in range(6):
            open(os.path.join(out_dir, f"train_{k:06d}.bin.tmp"), "wb").write(b"partial")
        r = prepare("--input", jsonl, "--output-dir", out_dir, "--shard-tokens", "20000", "--val-fraction", "0.1")
        check(r.returncode == 0 and shard_bytes(out_dir) == before and not glob.glob(os.path.join(out_dir, "*.tmp")),
              f"a killed run's .tmp files are removed by the next run: {sorted(os.listdir(out_dir))}")
        # a JSON-lines file that starts with a UTF-8 byte order mark (written by some Windows tools)
        bom = os.path.join(tmp, "bom.jsonl")
        open(bom, "wb").write(b"\xef\xbb\xbf" + json.dumps({"text": "first"}).encode() + b"\n" + json.dumps({"text": "second"}).encode() + b"\n")
        r = prepare("--input", bom, "--output-dir", os.path.join(tmp, "bom"), "--val-fraction", "0")
        check(r.returncode == 0, f"JSON lines after a byte order mark: exit {r.returncode} {r.stderr.strip()[-150:]}")
        compare_splits("JSON lines after a byte order mark", os.path.join(tmp, "bom"), expected_split([b"first", b"second"], 0))
        mixed = os.path.join(tmp, "mixed")
        os.mkdir(mixed)
        open(os.path.join(mixed, "a.txt"), "w").write("some text\n")
        open(os.path.join(mixed, "b.bin"), "wb").write(b"\x00\x01 binary")
        r = prepare("--input", mixed, "--output-dir", os.path.join(tmp, "mixed_out"), "--val-fraction", "0")
        check(r.returncode == 0 and "skipped 1 binary files" in r.stderr, f"a skipped binary file is said: {r.stderr.strip()[-160:]!r}")
        nofield = os.path.join(tmp, "nofield.jsonl")
        open(nofield, "w").write('{"text": "a"}\n{"body": "b"}\n')
        expect_failure("JSON line without the field", prepare("--input", nofield, "--output-dir", tmp), "nofield.jsonl:2:")
        afile = os.path.join(tmp, "afile")
        open(afile, "w").write("x")
        expect_failure("output directory under a file", prepare("--input", big, "--output-dir", afile + "/out"), "afile/out")
        expect_failure("output directory on a read-only file system", prepare("--input", big, "--output-dir", "/proc/llmc_out"), "/proc/llmc_out")
        expect_failure("unknown flag", prepare("--input", big, "--bogus", "1"), "--bogus")
        expect_failure("bad --val-fraction", prepare("--input", big, "--output-dir", tmp, "--val-fraction", "1.5"), "--val-fraction")
        # a bad flag value is a usage error, as an unknown flag: exit 2
        codes = [prepare("--input", big, "--output-dir", tmp, *bad).returncode
                 for bad in (["--shard-tokens", "abc"], ["--threads", "-1"], ["--val-fraction", "x"], ["--bogus", "1"])]
        check(codes == [2, 2, 2, 2], f"--shard-tokens abc, --threads -1, --val-fraction x, --bogus: exits {codes} (want 2 each)")

        # a UTF-8 byte order mark at the start of a text file is dropped (utf-8-sig), one further in is text
        bom_text = b"\xef\xbb\xbf" + "h\u00e9llo w\u00f6rld\n\ufeffa mark inside stays\n".encode()
        path = os.path.join(tmp, "bom.txt")
        open(path, "wb").write(bom_text)
        want = {"train": [EOT] + text_file_tokens(bom_text), "val": []}
        check(want["train"][1:] == common.ENC.encode_ordinary(bom_text.decode("utf-8-sig")) != ref_encode(bom_text),
              "the text-file reference drops the leading byte order mark, and only it")
        r = prepare("--input", path, "--output-dir", os.path.join(tmp, "bom_text"), "--val-fraction", "0")
        check(r.returncode == 0, f"a text file after a byte order mark: exit {r.returncode} {r.stderr.strip()[-150:]!r}")
        compare_splits("a text file after a byte order mark (utf-8-sig)", os.path.join(tmp, "bom_text"), want)
        r = bash(f"./prepare_data --input <(cat {path}) --output-dir {tmp}/bom_pipe --val-fraction 0")
        check(r.returncode == 0, f"a text file through a pipe: exit {r.returncode} {r.stderr.strip()[-150:]!r}")
        compare_splits("a text file after a byte order mark through <(cat ...)", os.path.join(tmp, "bom_pipe"), want)
        # with --doc-separator: the BOM does not hide the first separator line
        path = os.path.join(tmp, "bom_sep.txt")
        open(path, "wb").write(b"\xef\xbb\xbf%\r\nfirst\r\n%\r\nsecond\r\n")
        r = prepare("--input", path, "--output-dir", os.path.join(tmp, "bom_sep"), "--doc-separator", "%", "--val-fraction", "0")
        check(r.returncode == 0 and "warning" not in r.stderr, f"a byte order mark before the first separator: exit {r.returncode}, "
              f"{r.stderr.strip()[-150:]!r}")
        compare_splits("a byte order mark before the first separator: 2 documents", os.path.join(tmp, "bom_sep"),
                       expected_split([b"first\r\n", b"second\r\n"], 0))
        # a --doc-separator that matches no line: a warning; one with '\r' (never matches) is refused
        r = prepare("--input", path, "--output-dir", os.path.join(tmp, "no_sep"), "--doc-separator", "%%", "--val-fraction", "0")
        warned = [line for line in r.stderr.splitlines() if line.startswith("warning:") and "--doc-separator" in line]
        check(r.returncode == 0 and len(warned) == 1 and "matched no line" in warned[0],
              f"a --doc-separator that matched no line is warned about: {warned}")
        expect_failure("--doc-separator with '\\r'", prepare("--input", path, "--output-dir", tmp, "--doc-separator", "%\r"),
                       "--doc-separator")

        # pipes and devices: the first 8 KiB read are checked for a NUL byte, as a file's are
        gz_text = os.path.join(tmp, "text.txt.gz")
        with gzip.open(gz_text, "wb") as f:
            f.write(corpus[:100000])
        r = bash(f"./prepare_data --input <(cat {gz_text}) --output-dir {tmp}/gz_pipe")
        expect_failure("gzip bytes through <(cat x.gz)", r, "/dev/fd/")
        check("not text" in r.stderr and not glob.glob(os.path.join(tmp, "gz_pipe", "*.bin")),
              f"gzip bytes through a pipe are refused as not text, no shard written: {r.stderr.strip()[-160:]!r}")
        r = bash(f"ulimit -v 2000000; timeout 60 ./prepare_data --input /dev/zero --output-dir {tmp}/zero_out")
        expect_failure("--input /dev/zero", r, "/dev/zero: not text")
        # a stream with no cut point at all stops at 256 MiB (memory bounded), saying so
        r = bash(f"ulimit -v 3000000; ./prepare_data --input <(head -c 400000000 /dev/zero | tr '\\0' x) --output-dir {tmp}/uncut "
                 "--threads 1")
        expect_failure("400 MB without a cut point through a pipe", r, "no cut point in 256 MiB")
        # one pre-token piece over 16 MiB is refused, naming the file and its byte offset, before its merge
        # scratch (~36 bytes a byte: 260 MB of x took 5.5 GB) is allocated; ./tokenize says the same
        r = bash(f"ulimit -v 2000000; ./prepare_data --input <(head -c 260000000 /dev/zero | tr '\\0' x) --output-dir {tmp}/x260 "
                 "--threads 2")
        expect_failure("260 MB of 'x' (one piece) through a pipe under ulimit -v 2 GB", r,
                       "a pre-token piece of 260000000 bytes at byte offset 0, over the tokenizer's 16 MiB")
        check("/dev/fd/" in r.stderr and not glob.glob(os.path.join(tmp, "x260", "*.bin")),
              f"the 260 MB piece's error names the pipe, no shard written: {r.stderr.strip()[-100:]!r}")
        piece = b"x" * ((16 << 20) + 1)
        long_piece = os.path.join(tmp, "long_piece.txt")
        open(long_piece, "wb").write(b"hello world\n" * 1000 + piece + b"\n")
        for name, r in [("prepare_data", prepare("--input", long_piece, "--output-dir", os.path.join(tmp, "long_piece"))),
                        ("prepare_data --doc-separator", prepare("--input", long_piece, "--output-dir", os.path.join(tmp, "long_piece"),
                                                                 "--doc-separator", "%")),
                        ("tokenize", subprocess.run(["./tokenize", "--ids", long_piece], capture_output=True, cwd=ROOT, text=True))]:
            expect_failure(f"{name}: a piece of 16 MiB + 1 after 12000 bytes", r,
                           "long_piece.txt: a pre-token piece of 16777217 bytes at byte offset 12000")
        long_field = os.path.join(tmp, "long_field.jsonl")
        open(long_field, "wb").write(b'{"text": "a"}\n{"text": "ab ' + piece + b'"}\n')
        expect_failure("a JSON document field holding a piece of 16 MiB + 1", prepare("--input", long_field, "--output-dir", tmp),
                       "long_field.jsonl:2: the document field holds a pre-token piece of 16777218 bytes at byte offset 2")
        open(long_piece, "wb").write(piece[1:])
        r = subprocess.run(["./tokenize", "--ids", long_piece], capture_output=True, cwd=ROOT, text=True)
        check(r.returncode == 0 and len(r.stdout.split()) > 1000, f"tokenize: a piece of exactly 16 MiB is merged: exit {r.returncode}, "
                                                                   f"{len(r.stdout.split())} tokens {r.stderr.strip()[-100:]!r}")
        os.remove(long_piece)
        os.remove(long_field)

        # "-" is stdin (as for ./tokenize), read as text, from a redirected file or a pipe
        fortune = fortune_files(src)[0]
        want = {"train": [EOT] + text_file_tokens(open(fortune, "rb").read()), "val": []}
        for how in ("<", "cat {} |"):
            script = f"./prepare_data --input - --output-dir {tmp}/stdin --val-fraction 0 < {fortune}" if how == "<" else \
                     f"cat {fortune} | ./prepare_data --input - --output-dir {tmp}/stdin --val-fraction 0"
            r = bash(script)
            check(r.returncode == 0, f"--input - ({'a redirected file' if how == '<' else 'a pipe'}): exit {r.returncode} "
                                     f"{r.stderr.strip()[-150:]!r}")
            compare_splits(f"--input - from {'a redirected file' if how == '<' else 'a pipe'}", os.path.join(tmp, "stdin"), want)

        # a directory's files are taken in byte order of their whole paths (strcmp), not directory by directory:
        # d/a-b/y.txt < d/a.txt < d/a/x.txt ('-' < '.' < '/'); depth first per directory gave a/x, a-b/y, a.txt
        order = os.path.join(tmp, "order")
        for rel in ["a/x.txt", "a-b/y.txt", "a.txt", "a/b/z.txt", "a0.txt", "B.txt"]:
            os.makedirs(os.path.dirname(os.path.join(order, rel)), exist_ok=True)
            open(os.path.join(order, rel), "w").write(f"file {rel}\n")
        paths = sorted(os.path.join(order, rel) for rel in ["a/x.txt", "a-b/y.txt", "a.txt", "a/b/z.txt", "a0.txt", "B.txt"])
        r = prepare("--input", order, "--output-dir", os.path.join(tmp, "order_out"), "--val-fraction", "0")
        check(r.returncode == 0, f"a directory with a, a-b, a.txt: exit {r.returncode} {r.stderr.strip()[-150:]!r}")
        compare_splits("a directory's files in byte order of their paths (" + ", ".join(os.path.relpath(p, order) for p in paths) + ")",
                       os.path.join(tmp, "order_out"), expected_split([open(p, "rb").read() for p in paths], 0))

        # JSON numbers by JSON's grammar, as Python's json.loads: these are taken, the others are broken lines
        taken = ["0", "-0", "12", "-3.25", "1e9", "2.5E-3", "-0.0e+5", "NaN", "Infinity", "-Infinity", "[1, -2.0e1, {\"n\": 0}]"]
        numbers = os.path.join(tmp, "numbers.jsonl")
        open(numbers, "w").write("".join('{"n": %s, "text": "doc %d"}\n' % (v, i) for i, v in enumerate(taken)))
        r = prepare("--input", numbers, "--output-dir", os.path.join(tmp, "numbers_out"), "--val-fraction", "0")
        check(r.returncode == 0, f"JSON numbers json.loads takes ({', '.join(taken)}): exit {r.returncode} {r.stderr.strip()[-150:]!r}")
        compare_splits("JSON lines with numbers json.loads takes", os.path.join(tmp, "numbers_out"),
                       expected_split([json.loads(line)["text"].encode() for line in open(numbers)], 0))
        refused = ["01", "1.", ".5", "+1", "1e", "1e+", "-", "--1", "1.2.3", "1e5.0", "00", "-NaN", "[1, 2.]", "{\"m\": -}"]
        bad_numbers = []
        for v in refused:
            line = '{"n": %s, "text": "x"}' % v
            try:
                json.loads(line)
                bad_numbers.append(f"{v} (json.loads takes it: a wrong test)")
                continue
            except ValueError:
                pass
            open(numbers, "w").write('{"text": "first"}\n' + line + "\n")
            r = prepare("--input", numbers, "--output-dir", os.path.join(tmp, "numbers_out"))
            last = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
            if not (r.returncode != 0 and "numbers.jsonl:2: broken JSON line: a number outside JSON's grammar" in last):
                bad_numbers.append(f"{v}: exit {r.returncode} {last[-100:]!r}")
        check(not bad_numbers, f"{len(refused)} numbers json.loads refuses are broken lines naming line 2: {bad_numbers or 'all'}")

        # invalid UTF-8: one warning a file (the count, the first one's byte offset), the shards as without it
        latin1 = os.path.join(tmp, "latin1.txt")
        latin1_text = "caf\u00e9 na\u00efve\n".encode("latin-1") * 3 + "r\u00e9sum\u00e9\n".encode("utf-8")
        open(latin1, "wb").write(latin1_text)
        r = prepare("--input", latin1, "--input", fortune, "--output-dir", os.path.join(tmp, "latin1_out"), "--val-fraction", "0")
        warned = [line for line in r.stderr.splitlines() if "invalid UTF-8" in line]
        check(r.returncode == 0 and warned == [f"warning: {latin1}: 6 bytes of invalid UTF-8 (first at byte offset 3); the tokenizer "
                                               "keeps each as a byte token (convert a Latin-1/cp1252 file with iconv -f cp1252 -t utf-8)"],
              f"a Latin-1 file (and a UTF-8 one): exit {r.returncode}, one warning naming it: {warned}")
        compare_splits("a Latin-1 file's shards are its bytes' tokens (as tiktoken with surrogateescape)", os.path.join(tmp, "latin1_out"),
                       {"train": [EOT] + text_file_tokens(latin1_text) + [EOT] + text_file_tokens(open(fortune, "rb").read()), "val": []})
        open(latin1, "wb").write(b"\xef\xbb\xbf" + b"ok " * 5 + b"\xe2\x82 \xff\n")  # offsets count the dropped byte order mark
        r = prepare("--input", latin1, "--output-dir", os.path.join(tmp, "latin1_out"), "--val-fraction", "0")
        check(r.returncode == 0 and f"{latin1}: 3 bytes of invalid UTF-8 (first at byte offset 18)" in r.stderr,
              f"after a byte order mark, a truncated sequence and 0xFF: 3 bytes, the first at 18: {r.stderr.strip()[-230:]!r}")
        raw = os.path.join(tmp, "raw.jsonl")
        open(raw, "wb").write(b'{"text": "fine"}\n{"text": "caf\xe9"}\n')
        r = prepare("--input", raw, "--output-dir", os.path.join(tmp, "raw_out"), "--val-fraction", "0")
        check(r.returncode == 0 and f"{raw}: 1 byte of invalid UTF-8 (first at byte offset 30)" in r.stderr,
              f"a raw Latin-1 byte in a JSON string: warned: {r.stderr.strip()[-200:]!r}")
        # "not text" of a file named directly says what it may be: compressed, or UTF-16/UTF-32
        utf16 = os.path.join(tmp, "utf16.txt")
        open(utf16, "wb").write("some text\n".encode("utf-16"))
        r = prepare("--input", utf16, "--output-dir", tmp)
        expect_failure("a UTF-16 file named as input", r, "utf16.txt: not text")
        check("UTF-16" in r.stderr and "UTF-32" in r.stderr and "compressed" in r.stderr,
              f"the not-text message names compression and UTF-16/UTF-32: {r.stderr.strip()[-160:]!r}")
        # UTF-16 of a script without ASCII has no NUL byte: its byte order mark says what it is
        for order in ("utf-16", "utf-16-be"):
            cjk = os.path.join(tmp, f"cjk_{order}.txt")
            open(cjk, "wb").write((b"\xfe\xff" if order == "utf-16-be" else b"") + ("\u4e2d\u6587\u6587\u672c" * 2000).encode(order))
            expect_failure(f"CJK text in {order} with a byte order mark (no NUL byte)",
                           prepare("--input", cjk, "--output-dir", os.path.join(tmp, "cjk_out")), f"cjk_{order}.txt: not text")
        # a second prepare_data on a directory one is writing stops at once, touching nothing (the directory's flock held here)
        locked = os.path.join(tmp, "locked")
        os.makedirs(locked)
        held = os.open(locked, os.O_RDONLY)
        try:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
            open(os.path.join(locked, "train_000000.bin.tmp"), "wb").write(b"the other run's shard")
            plain = os.path.join(tmp, "plain.txt")
            open(plain, "w").write("some text\n")
            r = prepare("--input", plain, "--output-dir", locked)
            expect_failure("a second run on a directory being written", r, "another prepare_data is writing")
            check(sorted(os.listdir(locked)) == ["train_000000.bin.tmp"], f"the other run's files are left alone: {sorted(os.listdir(locked))}")
        finally:
            os.close(held)

        # tiny buffers: every chunk, read and batch boundary crossed thousands of times (a cut searched for past
        # the bytes read read beyond the buffer: AddressSanitizer stops the run)
        rng = random.Random(5)
        pieces = [b"%\n", b"%\r\n", b"\r", b"\r\n", b"\n\n", b"hello world ", b"\xff\xfe", b"\xe2\x82", b"\xc3\xa9t\xc3\xa9 ",
                  b"  \t ", b"x" * 300, b" " * 200, b"1234567890" * 3, b"\xe4\xb8\xad\xe6\x96\x87", b"'s 'LL ", b"\xf0\x9f\x98\x80"]
        adversarial = b"\xef\xbb\xbf" + b"".join(rng.choice(pieces) for _ in range(30000))
        adv = os.path.join(tmp, "adversarial.txt")
        open(adv, "wb").write(adversarial)
        jsonl = os.path.join(tmp, "lines.jsonl")
        with open(jsonl, "w") as f:
            for i in range(3000):
                f.write(json.dumps({"id": i, "text": "doc %d: " % i + "\u00e9\U0001F600 word " * rng.randrange(0, 60)}) + "\n")
        for name, inputs, extra in [("the fortunes, --doc-separator %", ["--input", src], ["--doc-separator", "%"]),
                                    ("adversarial text, --doc-separator %", ["--input", adv], ["--doc-separator", "%"]),
                                    ("adversarial text", ["--input", adv], []), ("JSON lines", ["--input", jsonl], [])]:
            args = inputs + ["--val-fraction", "0.1", "--shard-tokens", "30000", *extra]
            r_big = prepare(*args, "--output-dir", os.path.join(tmp, "big_bufs"))
            r_small = subprocess.run(["./build/prepare_data_small", *args, "--output-dir", os.path.join(tmp, "small_bufs")],
                                     capture_output=True, cwd=ROOT, text=True, errors="replace")
            same = r_big.returncode == 0 and r_small.returncode == 0 and \
                shard_bytes(os.path.join(tmp, "big_bufs")) == shard_bytes(os.path.join(tmp, "small_bufs"))
            check(same, f"tiny buffers, {name}: shards identical to the default sizes' (exits {r_big.returncode}, "
                        f"{r_small.returncode}: {r_small.stderr.strip()[-200:]!r})")
        r = subprocess.run(["./build/prepare_data_small", "--input", adv, "--output-dir", os.path.join(tmp, "small_bufs"),
                            "--doc-separator", "%", "--val-fraction", "0"], capture_output=True, cwd=ROOT, text=True, errors="replace")
        compare_splits("tiny buffers, adversarial text with separators, against tiktoken per document", os.path.join(tmp, "small_bufs"),
                       expected_split(common.split_documents(adversarial[3:], b"%"), 0))
        # the invalid-UTF-8 warning counts over thousands of chunks and carries: Python's surrogateescape count and offset
        decoded = adversarial[3:].decode("utf-8", "surrogateescape")
        escapes = [i for i, ch in enumerate(decoded) if "\udc80" <= ch <= "\udcff"]
        first = 3 + len(decoded[:escapes[0]].encode("utf-8", "surrogateescape"))
        want = f"{adv}: {len(escapes)} bytes of invalid UTF-8 (first at byte offset {first})"
        r_big = prepare("--input", adv, "--output-dir", os.path.join(tmp, "big_bufs"), "--val-fraction", "0")
        check(want in r.stderr and want in r_big.stderr, f"adversarial text, tiny and default buffers: {want!r}")
        long_line = os.path.join(tmp, "long_line.jsonl")
        with open(long_line, "w") as f:
            f.write('{"text": "a"}\n{"text": "b"}\n{"text": "' + "y " * (1 << 20) + '"}\n')
        r = subprocess.run(["./build/prepare_data_small", "--input", long_line, "--output-dir", os.path.join(tmp, "long_out")],
                           capture_output=True, cwd=ROOT, text=True, errors="replace")
        expect_failure("tiny buffers: a 2 MiB JSON line (1 MiB uncut at most)", r, "long_line.jsonl:3: no cut point in 1 MiB")
        # --doc-separator: a document of CRLF lines has no cut point (a cut after "\r\n" changes the tokens); the
        # error says so, not "a line that long"
        crlf = os.path.join(tmp, "crlf.txt")
        with open(crlf, "wb") as f:
            f.write(b"alpha beta the of\r\n" * 60000)
        r = subprocess.run(["./build/prepare_data_small", "--input", crlf, "--output-dir", os.path.join(tmp, "crlf_out"), "--doc-separator", "%"],
                           capture_output=True, cwd=ROOT, text=True, errors="replace")
        expect_failure("tiny buffers: a 1.1 MiB --doc-separator document of CRLF lines", r,
                       "with --doc-separator, also a document without a separator line whose lines end in")

        # ./tokenize bad input
        def tokenize(*args, stdin=b""):
            return subprocess.run(["./tokenize", *args], input=stdin, capture_output=True, cwd=ROOT)

        def text_of(r):
            return subprocess.CompletedProcess(r.args, r.returncode, r.stdout, r.stderr.decode("utf-8", "replace"))
        expect_failure("tokenize: missing file", text_of(tokenize("--ids", os.path.join(tmp, "missing.txt"))), "missing.txt")
        hello = os.path.join(tmp, "hello.txt")
        open(hello, "wb").write(b"hello world")
        r = tokenize(f"--ids={hello}")
        check(r.returncode == 0 and r.stdout.split() == [b"31373", b"995"], f"tokenize --ids=FILE (llmc/cli.h's forms): {r.stdout!r}")
        r = text_of(tokenize("--idz", hello))
        check(r.returncode == 2 and "did you mean --ids?" in r.stderr, f"tokenize: a misspelt flag exits 2 with a suggestion: {r.stderr!r}")
        expect_failure("tokenize --text: id out of range", text_of(tokenize("--text", stdin=b"15496 50257 1")), "token 1")
        expect_failure("tokenize --text: not a number", text_of(tokenize("--text", stdin=b"15496 12x")), "token 1")
        real = open(os.path.join(ROOT, "data", "gpt2_tokenizer.bin"), "rb").read()
        for name, blob, must in [
            ("truncated", real[:-5], "truncated"),
            ("corrupt payload", real[:5000] + bytes([real[5000] ^ 1]) + real[5001:], "CRC"),
            ("wrong magic", b"XXXX" + real[4:], "magic"),
            ("header only", real[:1024], "truncated"),
        ]:
            path = os.path.join(tmp, "tok_" + name.replace(" ", "_") + ".bin")
            open(path, "wb").write(blob)
            expect_failure(f"tokenizer file {name}", text_of(tokenize("--tokenizer", path, "--ids", big)), path)
    print(f"{common.passed} passed, {common.failed} failed")
    return common.failed != 0


if __name__ == "__main__":
    sys.exit(main())
