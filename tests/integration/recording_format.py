"""An independent reader of pystrobe's recording format, written from
docs/format.md alone (zstd payloads through the zstd command): the tests
check pystrobe's files against the specification with it, and read the
sample times no output shows."""
import struct
import subprocess
import zlib

MAGIC = b"PYSTREC\n"


class Cut(Exception):
    """The file ends inside a block."""


def _var(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return v, i


def _zz(b, i):
    u, i = _var(b, i)
    return (u >> 1) ^ -(u & 1), i


def blocks(data):
    """[(offset, compression, payload bytes)] of the complete blocks; Cut if
    the file ends inside one (with the complete ones as its argument)."""
    assert data[:8] == MAGIC, "bad magic"
    heads, off, cut = [], 16, False
    while off < len(data):
        if len(data) - off < 20:
            cut = True
            break
        magic, comp, stored, raw, crc = struct.unpack_from("<4sB3xIII", data, off)
        assert magic == b"PBLK", f"bad block magic at {off}"
        if off + 20 + stored > len(data):
            cut = True
            break
        payload = data[off + 20:off + 20 + stored]
        assert zlib.crc32(payload) == crc, f"checksum at {off}"
        heads.append((off, comp, raw, payload))
        off += 20 + stored
    # zstd blocks are pieces of one stream: decompressed together (an
    # unfinished stream makes zstd complain after writing all it has).
    stream = b"".join(p for _, c, _, p in heads if c == 1)
    dec = subprocess.run(["zstd", "-d", "-c", "-q"], input=stream,
                         capture_output=True).stdout if stream else b""
    out, pos = [], 0
    for off, comp, raw, payload in heads:
        if comp == 1:
            payload, pos = dec[pos:pos + raw], pos + raw
        assert len(payload) == raw, f"raw length at {off}"
        out.append((off, comp, payload))
    if cut:
        raise Cut(out)
    return out


def _fields(b, i):
    n, i = _var(b, i)
    d = {}
    for _ in range(n):
        kl, i = _var(b, i)
        key = b[i:i + kl].decode()
        i += kl
        t = b[i]
        i += 1
        if t == 0:
            v, i = _var(b, i)
        elif t == 1:
            v, i = _zz(b, i)
        elif t == 2:
            sl, i = _var(b, i)
            v = b[i:i + sl].decode()
            i += sl
        else:
            v = struct.unpack_from("<d", b, i)[0]
            i += 8
        d[key] = v
    return d, i


def read(path):
    """{"meta", "stats" (the last), "samples": [(t_ns, rc, [(tid, ns_id,
    status, [(file, qualname, line, end_line, col, end_col, kind, firstlineno,
    opcode) innermost first])])], "names" ({tid: the last THREAD_NAME given},
    "sources" ({file: {"mark": 0-2, "text": bytes or "why": bytes}}: SOURCE
    records), "unread" ({index in samples: [(tid, ns_id, status)]}: UNREAD
    records, the threads of that sample whose stacks could not be read),
    "complete", "cut", "blocks"}."""
    data = open(path, "rb").read()
    major = struct.unpack_from("<H", data, 8)[0]
    cut = False
    try:
        bl = blocks(data)
    except Cut as e:
        bl, cut = e.args[0], True
    strings, frames, threads, stacks = [], [], [], {}
    res = {"meta": None, "stats": None, "samples": [], "names": {}, "sources": {},
           "unread": {}, "complete": False, "cut": cut, "blocks": len(bl)}
    t = 0
    for _, _, b in bl:
        i = 0
        times = hi_ = None
        if major >= 2:  # the block's time column, at its end
            n, cl = struct.unpack_from("<II", b, len(b) - 8)
            col = b[len(b) - 8 - cl:len(b) - 8]
            hi, lo, ti_, hi_, times = col[:cl - n], col[cl - n:], 0, 0, True
            b = b[:len(b) - 8 - cl]
        typ = None  # the record type before, within the block
        while i < len(b):
            last, typ = typ, b[i]
            i += 1
            if typ == 1:
                res["meta"], i = _fields(b, i)
                t = res["meta"]["start_monotonic_ns"] // 1000
                interval = res["meta"]["interval_ns"] // 1000
            elif typ == 2:
                n, i = _var(b, i)
                strings.append(b[i:i + n].decode("utf-8", "replace"))
                i += n
            elif typ == 3:
                f, i = _var(b, i)
                q, i = _var(b, i)
                first, i = _zz(b, i)
                line, i = _zz(b, i)
                dl, i = _zz(b, i)
                col, i = _zz(b, i)
                dc, i = _zz(b, i)
                kind, i = _var(b, i)
                op, i = _zz(b, i)
                frames.append((strings[f], strings[q], line, line + dl, col, col + dc, kind,
                               first, op))
            elif typ == 4:
                tid, i = _var(b, i)
                ns, i = _var(b, i)
                threads.append((tid, ns))
            elif typ == 5:
                res["stats"], i = _fields(b, i)
            elif typ == 6:
                if times is None:
                    dt, i = _zz(b, i)
                else:
                    u, hi_ = _var(hi, hi_)
                    u = u << 8 | lo[ti_]
                    ti_ += 1
                    dt = (u >> 1) ^ -(u & 1)
                n, i = _var(b, i)
                rc = 0
                if n & 1:
                    rc, i = _zz(b, i)
                n >>= 1
                t += interval + dt
                ths = []
                for _ in range(n):
                    ti, i = _var(b, i)
                    status, i = _var(b, i)
                    pop, i = _var(b, i)
                    push, i = _var(b, i)
                    st = stacks.get(ti, [])
                    st = st[:len(st) - pop]
                    for _ in range(push):
                        fid, i = _var(b, i)
                        st.append(fid)
                    stacks[ti] = st
                    ths.append((threads[ti][0], threads[ti][1], status,
                                [frames[x] for x in reversed(st)]))
                res["samples"].append((t * 1000, rc, ths))
            elif typ == 7:
                res["complete"] = True
                return res
            elif typ == 32:
                n, i = _var(b, i)
                ti, j = _var(b, i)
                sid, _ = _var(b, j)
                res["names"][threads[ti][0]] = strings[sid]
                i += n
            elif typ == 33:
                n, i = _var(b, i)
                end = i + n
                sid, j = _var(b, i)
                flags, j = _var(b, j)
                ln, j = _var(b, j)
                data, i = b[j:j + ln], end
                if flags >= 16:
                    continue
                src = res["sources"].setdefault(strings[sid], {})
                if flags & 8:
                    src["mark"] = flags & 3
                elif "mark" not in src:
                    key = "why" if flags & 4 else "text"
                    src.update({"mark": flags & 3, key: data})
            elif typ == 34:
                assert last == 6, "UNREAD not right after a SAMPLE"
                n, i = _var(b, i)
                end = i + n
                k, j = _var(b, i)
                unread = []
                for _ in range(k):
                    ti, j = _var(b, j)
                    status, j = _var(b, j)
                    unread.append((threads[ti][0], threads[ti][1], status))
                res["unread"][len(res["samples"]) - 1] = unread
                i = end
            elif typ > 34:
                n, i = _var(b, i)
                i += n
            else:
                raise AssertionError(f"record type {typ}")
    return res
